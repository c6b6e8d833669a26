"""``--token-file``: the token written to a file on every refresh, for tools that only read files.

Each write is atomic (``files.write_atomic``): a reader sees the old token or the new one, never an
empty or half-written file, even across a crash. The file holds the bare token, no newline
(like a projected service-account token), with mode --token-file-mode set on every write.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import SinkError, TokenRelayError
from ..lite import files
from ..tokens.sts import Issued
from ..tokens.token import Token
from .parentdirs import make_parents

log = logging.getLogger("tokenrelay.sinks")


def refuse_symlink(path: str | Path) -> None:
    """Raise OSError when ``path`` is a symbolic link: the rename would replace the link itself, and
    whoever placed it wanted the token written elsewhere (say, into a file another user reads)."""
    if Path(path).is_symlink():
        raise OSError(errno.ELOOP, f"{path} is a symbolic link; name the file itself, not a link to it")


def write_regular(path: Path, data: bytes, mode: int) -> None:
    """``write_private_file`` to a path that is not a symbolic link (--token-file, --render)."""
    refuse_symlink(path)
    write_private_file(path, data, mode)


def write_private_file(path: Path, data: bytes, mode: int) -> None:
    """``files.write_atomic``, its missing parents made first with a mode no wider than ``mode``
    lets through (never the umask's: another user must not replace the token file)."""
    make_parents(path.parent, mode)
    files.write_atomic(path, data, mode)


class FileSink:
    """One --token-file: an Observer that writes its audience's token at every refresh."""

    def __init__(self, path: str, audience: str, mode: int = 0o600) -> None:
        self.path = Path(path)
        self.audience = audience
        self.mode = mode  # SIGHUP may change it; the next write applies it

    def write(self, token: Token) -> None:
        """Write ``token`` now; raises SinkError."""
        try:
            write_regular(self.path, token.value.encode(), self.mode)
        except OSError as exc:
            raise SinkError(
                f"cannot write the token file {self.path} (--token-file): {exc.strerror or exc}"
            ) from None
        log.info(
            "token file written",
            extra={"path": str(self.path), "audience": self.audience, "fingerprint": token.fingerprint},
        )

    def write_tokens(self, tokens: Mapping[str, Token]) -> None:
        """``--once``: write this file's audience's token from ``tokens``; raises SinkError."""
        self.write(tokens[self.audience])

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
