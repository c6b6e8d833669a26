"""What every HTTP/2 client connection of one proxy shares: the upstream pool and batched writes.

The HTTP/2 side of the server's ``Upstreams``, made by the first HTTP/2 client (``Upstreams.side``),
so that a proxy that only ever sees HTTP/1.1 never imports h2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .flush import Flusher
from .resets import ResetBudget
from .upstream import H2Pool

if TYPE_CHECKING:
    from ..upstreams import Upstreams


class H2Relay:
    """The HTTP/2 side of one ProxyServer."""

    def __init__(self, upstreams: Upstreams) -> None:
        upstream = upstreams.target
        self.flusher = Flusher()
        self.pool = H2Pool(upstreams, self.flusher)
        self.scheme = b"https" if upstream.ssl is not None else b"http"
        self.authority = upstream.authority
        self.target = upstream
        limits = upstreams.limits
        self.resets = ResetBudget(limits.h2_resets, limits.h2_resets, upstreams.clock)

    def close(self) -> None:
        self.pool.close()

    def sweep(self, now: float) -> None:
        self.pool.sweep(now)
        self.resets.sweep()
