"""``--token-file``: the token written to a file on every refresh, for tools that only read files.

Each write is atomic: the token goes to a temporary file in the same directory, is fsynced, renamed
over the target, and the directory is fsynced. A reader therefore sees the old token or the new one,
never an empty or half-written file, even across a crash. The file holds the bare token, no newline
(like a projected service-account token), with mode --token-file-mode set on every write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .errors import TokenRelayError
from .parentdirs import make_parents
from .sts import Issued
from .token import Token

log = logging.getLogger("tokenrelay.sinks")


class SinkError(TokenRelayError):
    """A token file could not be written; the message names the file and the cause."""


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` with ``data`` so that no reader ever sees a partial file."""
    directory = path.parent
    make_parents(directory, mode)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    try:
        # fchmod, not the umask: the mode must hold even when the file existed with another one.
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        tmp.replace(path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable. Some filesystems (FUSE, some network ones) refuse to fsync a
    # directory; the rename has happened all the same, so that is not worth failing a refresh for.
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class FileSink:
    """One --token-file: an Observer that writes its audience's token at every refresh."""

    def __init__(self, path: str, audience: str, mode: int = 0o600) -> None:
        self.path = Path(path)
        self.audience = audience
        self.mode = mode  # SIGHUP may change it; the next write applies it

    def write(self, token: Token) -> None:
        """Write ``token`` now; raises SinkError."""
        try:
            write_atomic(self.path, token.value.encode(), self.mode)
        except OSError as exc:
            raise SinkError(
                f"cannot write the token file {self.path} (--token-file): {exc.strerror or exc}"
            ) from None
        log.info(
            "token file written",
            extra={"path": str(self.path), "audience": self.audience, "fingerprint": token.fingerprint},
        )

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
        if token.audience != self.audience:
            return
        try:
            self.write(token)
        except SinkError as exc:
            # The socket still serves the token: a full disk must not stop the refresh schedule.
            log.error("token file not written", extra={"path": str(self.path), "error": exc.message})

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
        """A failed exchange leaves the file alone: the old token stays valid until it expires."""


def from_settings(pairs: Sequence[tuple[str, str]], mode: int) -> list[FileSink]:
    """A sink per ``(path, audience)`` of ``Settings.token_files``."""
    return [FileSink(path, audience, mode) for path, audience in pairs]
