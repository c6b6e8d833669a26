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
from .limits import Limits
from .observer import ProxyObserver
from .target import Target
from .upstreams import Upstreams


class Served(Protocol):
    """A client connection as the server sees it: swept for timeouts, drained on stop."""

    def sweep(self, now: float) -> None: ...

    def shutdown(self) -> None: ...

    def abort(self) -> None: ...


@dataclass(slots=True, eq=False)
class ProxyContext:
    """The narrow view of the proxy that each client connection gets."""

    target: Target
    upstreams: Upstreams  # the server's: each front end takes its pool from it
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
