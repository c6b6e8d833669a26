"""A fresh private directory for one run of a command (``tokenrelay exec``, ``tokenrelay dev``), in
which it serves a Unix socket.

Standard library only.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

# A Unix socket's path must fit in 108 bytes: a long $TMPDIR (some CI runners', macOS's in a deep
# home) falls back to /tmp, leaving room for the directory's and the socket's names.
MAX_PARENT = 60


def private_directory(prefix: str) -> Path:
    """A fresh 0700 directory named ``prefix...`` under $TMPDIR, or /tmp when that is too long."""
    parent = tempfile.gettempdir()
    if len(parent) > MAX_PARENT:
        parent = "/tmp"  # noqa: S108 - mkdtemp makes it 0700 and unguessable
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
