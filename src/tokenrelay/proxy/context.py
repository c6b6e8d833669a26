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
from .http1.pool import UpstreamPool
from .limits import Limits
from .observer import ProxyObserver
from .target import Target


class Served(Protocol):
    """A client connection as the server sees it: swept for timeouts, drained on stop."""

    def sweep(self, now: float) -> None: ...

    def shutdown(self) -> None: ...

    def abort(self) -> None: ...


class Http2Side(Protocol):
    """The HTTP/2 half (``http2.relay``), made by the first HTTP/2 client: closed and swept by the server."""

    def sweep(self, now: float) -> None: ...

    def close(self) -> None: ...


@dataclass(slots=True, eq=False)
class ProxyContext:
    """The narrow view of the proxy that each client connection gets."""

    target: Target
    pool: UpstreamPool
    bearer: Bearer
    limits: Limits
    observer: ProxyObserver
    clock: Callable[[], float]
    upstream_ca: str | None = None  # the CA file the HTTP/2 half's TLS trusts, as the pool's does
    connections: set[Served] = field(default_factory=set)
    on_empty: Callable[[], None] | None = None
    h2: Http2Side | None = None  # h2 loads only with the first HTTP/2 client

    def closed(self, conn: Served) -> None:
        self.connections.discard(conn)
        if not self.connections and self.on_empty is not None:
            self.on_empty()
