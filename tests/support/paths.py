"""The one short socket directory: pytest's tmp_path can exceed the 108-byte limit of a socket path."""

from __future__ import annotations

import tempfile
from pathlib import Path


def short_dir(prefix: str = "tr-", mode: int = 0o700) -> Path:
    """A new directory directly under /tmp (``mode`` 0755 when other users' processes must reach it);
    the caller removes it."""
    where = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    where.chmod(mode)
    return where
