"""Read a small file that must be a regular file, without ever blocking on what sits at its path.

A FIFO at a path the sidecar reads (the OIDC token at every exchange, the --config file on SIGHUP)
would block ``open()`` until a writer came, freezing the event loop and with it the socket and the
proxy. Opened with ``O_NONBLOCK``, a FIFO opens at once; ``fstat`` then tells it apart and it is
refused. Standard library only: the credential helpers read the OIDC token through here too.
"""

from __future__ import annotations

import errno
import os
import stat

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularFile(OSError):
    """The path names something other than a regular file or a directory; ``kind`` says what."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{path} is {kind}, not a regular file")
        self.kind = kind


def read_regular(path: str, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of the regular file at ``path`` (one more, so a caller can tell it
    is over the limit). Raises FileNotFoundError, IsADirectoryError, NotRegularFile or OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise NotRegularFile(path, kind)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
