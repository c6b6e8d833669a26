"""Give the heap's free pages back to the system once the sidecar settles after an exchange.

An idle sidecar's resident memory is the budget (issues 10 and 11: under 40 MiB with the proxy on).
Start-up and each exchange allocate and free a few MiB (imports, TLS handshakes, JSON); glibc keeps
the freed pages mapped, so they would stay in the RSS for the process's life. ``Trimmer`` is a
provider Observer: a moment after an exchange ends (when its buffers are garbage) it collects the
cycles and calls glibc's ``malloc_trim(0)``, which returns the free pages. Measured with
bench/idle_rss.py: about 1 MiB less idle RSS. Where the C library has no ``malloc_trim`` (musl,
macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
from collections.abc import Callable

from ..errors import TokenRelayError
from ..tokens.sts import Issued
from ..tokens.token import Token

SETTLE_SECONDS = 1.0  # long enough for the exchange's response and its TLS buffers to be let go


def _find_malloc_trim() -> Callable[[int], int] | None:
    """The C library's malloc_trim, looked up among the symbols the process already has (no
    ``ctypes.util.find_library``: it runs ldconfig in a subprocess); None where there is none."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


def release_free_memory(trim: Callable[[int], int] | None) -> None:
    """Collect the garbage cycles, then hand the heap's free pages back (when ``trim`` exists)."""
    gc.collect()
    if trim is not None:
        trim(0)


class Trimmer:
    """A provider Observer that releases free memory once things settle after each exchange."""

    def __init__(self, trim: Callable[[int], int] | None = None, settle: float = SETTLE_SECONDS) -> None:
        self.trim = trim if trim is not None else _find_malloc_trim()
        self._settle = settle
        self._pending: asyncio.TimerHandle | None = None

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
        self._schedule()

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
        self._schedule()

    def _schedule(self) -> None:
        if self._pending is not None and not self._pending.cancelled():
            self._pending.cancel()  # several audiences exchanging at once: one release, after the last
        self._pending = asyncio.get_running_loop().call_later(self._settle, self._release)

    @property
    def pending(self) -> bool:
        """Whether a release is scheduled."""
        return self._pending is not None

    def _release(self) -> None:
        self._pending = None
        release_free_memory(self.trim)

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
