"""The proxy's connections to its one upstream, both protocols: owned by the server, one per proxy.

Each front end keeps its own pool (``http1.pool.UpstreamPool``; ``http2.relay.H2Relay``, the HTTP/2
pool with its batched writes and reset budget), made here on the first client that needs it, so that
a proxy that only ever sees HTTP/1.1 never imports h2. The pools open their connections through
``connect``, one code for both: the upstream's address, the connect timeout, TLS and its server name.
The server sweeps and closes them all through this object, and this module imports no front end
(tests/proxy/test_layering.py).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Protocol, TypeVar, cast

from .limits import Limits
from .target import Target


class Side(Protocol):
    """A front end's upstream pool as the server sees it: swept for idle connections, closed on stop."""

    def sweep(self, now: float) -> None: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=Side)
P = TypeVar("P", bound=asyncio.BaseProtocol)


class Upstreams:
    """The one upstream's pools, one per protocol, and the connect code they share."""

    def __init__(
        self, target: Target, limits: Limits, clock: Callable[[], float], ca_file: str | None = None
    ) -> None:
        self.target = target
        self.limits = limits
        self.clock = clock
        self.ca_file = ca_file  # the CA file the HTTP/2 pool's TLS trusts, as target.ssl does
        self._sides: dict[Callable[[Upstreams], Side], Side] = {}

    def side(self, make: Callable[[Upstreams], S]) -> S:
        """The pool ``make`` builds (a front end's class), made on first use."""
        side = self._sides.get(make)
        if side is None:
            side = self._sides[make] = make(self)
        return cast(S, side)

    async def connect(
        self, factory: Callable[[], P], tls: ssl.SSLContext | None
    ) -> tuple[asyncio.BaseTransport, P]:
        """A new connection to the upstream, within the connect timeout (``--proxy-timeout``); raises
        OSError (unreachable, refused, TLS) or TimeoutError."""
        target = self.target
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.limits.upstream_timeout):
            return await loop.create_connection(
                factory,
                target.host,
                target.port,
                ssl=tls,
                server_hostname=target.host if tls is not None else None,
            )

    def sweep(self, now: float) -> None:
        for side in list(self._sides.values()):
            side.sweep(now)

    def close(self) -> None:
        for side in self._sides.values():
            side.close()
