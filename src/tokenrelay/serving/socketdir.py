"""A fresh private directory for one run of a command that serves its local API's socket in it
(``exec``, ``dev``), where the socket's path fits.

A Unix socket's path is short (107 bytes on Linux), and ``unixsocket.bind`` binds it through a longer
staging name beside it: some CI runners' and pytest's temporary directories leave no room for that.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..errors import ConfigError
from .unixsocket import MAX_PATH_BYTES, longest_bound

SOCKET_NAME = "tokenrelay.sock"


def private_directory(prefix: str = "tokenrelay-exec-") -> Path:
    """A fresh 0700 directory for one run of a command that serves a socket in it (exec, dev): under
    $TMPDIR when the socket, bound there through its staging name, fits in a Unix socket's path
    (some CI runners' and pytest's temporary directories are too long); else under /tmp. Raises
    ConfigError naming TMPDIR when neither has room or the directory cannot be made."""
    needs = {}
    for parent in dict.fromkeys((tempfile.gettempdir(), "/tmp")):  # noqa: S108 - mkdtemp: 0700, unguessable
        # mkdtemp names it the prefix and 8 random characters
        needs[parent] = longest_bound(str(Path(parent, prefix + "x" * 8, SOCKET_NAME)))
        if needs[parent] <= MAX_PATH_BYTES:
            try:
                return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
            except OSError as exc:
                raise ConfigError(
                    f"cannot make a private directory in {parent} ({exc.strerror or exc}): set TMPDIR "
                    "to a directory you can write in"
                ) from None
    said = "; ".join(f"under {parent}, {length} bytes" for parent, length in needs.items())
    raise ConfigError(
        f"no room for the local API's socket: a Unix socket's path holds at most {MAX_PATH_BYTES} bytes "
        f"({said}): set TMPDIR to a shorter directory"
    )
