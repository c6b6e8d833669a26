"""What a client connection may use of the proxy: its bounds, its parts and the clock, not the server.

Like uvicorn's ``ServerState``: the server builds one ``ProxyContext`` and hands it to every
connection it accepts. A connection registers itself in ``connections`` and calls ``closed`` when it
ends; the server's drain on stop listens through ``on_empty``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .bearer import Bearer
from .observer import ProxyObserver
from .pool import UpstreamPool
from .upstream import Upstream


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds against abusive or broken clients (and a slow upstream)."""

    header_bytes: int = 32 * 1024  # request line and headers together (431 beyond); the answer's too
    header_count: int = 100  # (431 beyond); the answer's too (502 beyond)
    header_timeout: float = 10.0  # from a request's first byte to the end of its head (408 after)
    idle_timeout: float = 75.0  # a keep-alive connection with no request is closed after this
    max_connections: int = 1024  # client connections held at once (503 beyond)
    upstream_timeout: float = 60.0  # from a request sent in full to the answer's head (504 after),
    # and the longest an upstream may go silent mid-answer, or leave the request unread (a cut after)
    body_timeout: float = 20.0  # a request body's allowance before body_min_rate applies (408 after)
    body_min_rate: int = 500  # bytes/s a request body must average beyond body_timeout


class Served(Protocol):
    """A client connection as the server sees it: swept for timeouts, drained on stop."""

    def sweep(self, now: float) -> None: ...

    def shutdown(self) -> None: ...

    def abort(self) -> None: ...


@dataclass(slots=True, eq=False)
class ProxyContext:
    """The narrow view of the proxy that each client connection gets."""

    target: Upstream
    pool: UpstreamPool
    bearer: Bearer
    limits: Limits
    observer: ProxyObserver
    clock: Callable[[], float]
    connections: set[Served] = field(default_factory=set)
    on_empty: Callable[[], None] | None = None

    def closed(self, conn: Served) -> None:
        self.connections.discard(conn)
        if not self.connections and self.on_empty is not None:
            self.on_empty()
