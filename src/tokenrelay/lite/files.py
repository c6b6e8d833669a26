"""The one atomic file write, for the --token-file sinks and the helpers' token cache.

The data goes to a temporary file made by ``mkstemp`` (exclusive, never through a symlink) in the
same directory, gets its mode with ``fchmod`` (not the umask: the mode must hold even when the file
existed with another one), is fsynced, renamed over the target, and the directory is fsynced. A
reader therefore sees the old content or the new, never an empty or half-written file, even across a
crash. Standard library only: the credential helpers write their cache with it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` so that no reader ever sees a partial file; raises OSError."""
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        Path(tmp_name).replace(path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            Path(tmp_name).unlink()
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable. Some filesystems (FUSE, some network ones) refuse to fsync a
    # directory; the rename has happened all the same, so that is not worth failing a write for.
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
