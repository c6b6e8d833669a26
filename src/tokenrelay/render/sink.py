"""A --render at work: an Observer that rewrites its file's tokenrelay entries at every refresh.

Each exchange for one of its hosts' audiences re-renders the file from the file as it stands (so an
edit the user made meanwhile is kept) and writes it atomically through the --token-file sinks' one
write (temporary file in the same directory, fsync, rename; parents made 0700), with mode
--render-mode. A symbolic link at the path is refused, as for --token-file. A failed write (a full
disk, a read-only path, a file that is not JSON) is one error line and a metric: the old file stays
whole, the socket keeps serving, and the next refresh tries again. ``clear`` takes tokenrelay's
entries out on a clean stop, and removes the file when tokenrelay made it and nothing else is in it.
The user's own entries under keys tokenrelay owns are kept in ``aside`` before they are replaced, and
``clear`` puts them back. Each read-modify-write of the render and its aside file holds ``lock``, so
two tokenrelay processes rendering one file take turns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from ..errors import SinkError, TokenRelayError
from ..helpers.hosts import Host
from ..lite.regularfile import read_regular
from ..serving import sinks
from ..tokens.sts import Issued
from ..tokens.token import Token
from . import aside, lock
from .format import Entry, FormatError
from .table import Render

log = logging.getLogger("tokenrelay.render")

MAX_FILE = 1 << 20
# The daemon's metrics hook: (format, path, ok) after each attempt to write.
Report = Callable[[str, str, bool], None]


def _unreported(name: str, path: str, ok: bool) -> None:
    """The hook when no metrics are kept."""


class RenderSink:
    """One --render."""

    def __init__(
        self,
        render: Render,
        hosts: Sequence[Host],
        mode: int = 0o600,
        report: Report = _unreported,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.render = render
        self.hosts = tuple(hosts)
        self.mode = mode
        self._report = report
        self._clock, self._sleep = clock, sleep  # the wait for another process's lock
        self._owned = tuple(dict.fromkeys(render.format.key(host) for host in self.hosts))
        self._audiences = frozenset(host.audience for host in self.hosts)
        self._tokens: dict[str, Token] = {}
        self._existed: bool | None = None  # was there a file before tokenrelay first wrote it

    @property
    def path(self) -> str:
        return str(self.render.path)

    # -- Observer -------------------------------------------------------------------------------

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
        if token.audience not in self._audiences:
            return
        self._tokens[token.audience] = token
        try:
            self.write()
        except SinkError as exc:
            log.error("render not written", extra={"path": self.path, "error": exc.message})

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
        """A failed exchange leaves the file alone: the old token stays valid until it expires."""

    # -- writing ----------------------------------------------------------------------------------

    def write_tokens(self, tokens: Mapping[str, Token]) -> None:
        """``--once``: render from ``tokens`` (by audience); raises SinkError."""
        self._tokens.update((a, t) for a, t in tokens.items() if a in self._audiences)
        self.write()

    def write(self) -> None:
        """Render the tokens held; raises SinkError."""
        entries = [
            Entry(self.render.format.key(host), host, token.value, token.expire_time)
            for host in self.hosts
            if (token := self._tokens.get(host.audience)) is not None
        ]
        self._apply(entries)
        log.info(
            "render written",
            extra={
                "path": self.path,
                "format": self.render.format.name,
                "hosts": [entry.host.netloc for entry in entries],
                "fingerprints": [self._tokens[a].fingerprint for a in sorted(self._tokens)],
            },
        )

    def clear(self) -> None:
        """Take tokenrelay's entries out (a clean stop); errors are logged, not raised."""
        if self._existed is None and not aside.path_for(self.render.path).exists():
            return  # never written, nothing set aside by a run before: nothing of ours is there
        try:
            self._apply([])
        except SinkError as exc:
            log.error("render not cleared", extra={"path": self.path, "error": exc.message})
            return
        log.info("render cleared", extra={"path": self.path})

    def _apply(self, entries: list[Entry]) -> None:
        fmt, path = self.render.format, self.render.path
        try:
            with lock.held(path, clock=self._clock, sleep=self._sleep):
                self._rewrite(entries)
        except FormatError as exc:
            self._report(fmt.name, self.path, False)
            raise SinkError(f"cannot render {fmt.name} into {path} (--render): {exc}") from None
        except OSError as exc:
            self._report(fmt.name, self.path, False)
            raise SinkError(
                f"cannot write {path} (--render {self.render.spec}): {exc.strerror or exc}"
            ) from None
        self._report(fmt.name, self.path, True)

    def _rewrite(self, entries: list[Entry]) -> None:
        """Read, render and write the file and its aside file; raises FormatError, OSError.
        Precondition: holds the render's lock."""
        fmt, path = self.render.format, self.render.path
        existing = _read(str(path))
        if self._existed is None:
            self._existed = existing is not None
        kept = self._set_aside(existing)
        text = fmt.render(existing, self._owned, entries, kept)
        if not entries and not self._existed and text in (None, "", fmt.render(None, (), [])):
            text = None  # tokenrelay made the file and nothing but its skeleton is left
        if text is None:
            if existing is not None:
                path.unlink()
        elif text != existing:
            sinks.write_regular(path, text.encode(), self.mode)
        if kept and not entries:
            aside.remove(path)  # only now: the user's entries are back in the file written

    def _set_aside(self, existing: str | None) -> dict[str, str]:
        """Every entry set aside from this render: those kept before (by an earlier run too), with
        the user's own now in the file under keys tokenrelay owns, saved before any is replaced."""
        kept = aside.load(self.render.path)
        if existing is None:
            return kept
        found = self.render.format.set_aside(existing, (*self._owned, *kept))
        if any(kept.get(key) != text for key, text in found.items()):
            kept.update(found)  # the file's is the user's latest word
            aside.save(self.render.path, kept)
            log.info(
                "render sets the user's own entries aside",
                extra={
                    "path": self.path,
                    "keys": sorted(found),
                    "aside": str(aside.path_for(self.render.path)),
                },
            )
        return kept


def _read(path: str) -> str | None:
    """The file's text, None when there is none; raises OSError (a symlink, a FIFO, too big)."""
    sinks.refuse_symlink(path)
    try:
        raw = read_regular(path, MAX_FILE)
    except FileNotFoundError:
        return None
    if len(raw) > MAX_FILE:
        raise OSError(f"{path} is over 1 MiB, too big to be a credentials file")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise OSError(f"{path} is not UTF-8 text") from None
