"""The proxy as a daemon component: listen, sweep timeouts, drain on stop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..lite.names import DEFAULT_PROXY_LISTEN, DEFAULT_SHUTDOWN_GRACE
from ..lite.netloc import is_loopback
from ..tokens.token import TokenSource
from .bearer import Bearer
from .context import ProxyContext
from .http1.downstream import ClientConnection
from .limits import Limits
from .observer import NullObserver, ProxyObserver
from .target import Target
from .upstreams import Upstreams

log = logging.getLogger("tokenrelay.proxy")

SWEEP_SECONDS = 1.0


class ProxyServer:
    """The token-injecting reverse proxy in front of ``api_url``; a daemon Component."""

    def __init__(
        self,
        api_url: str,
        tokens: TokenSource,
        *,
        listen: tuple[str, int] = DEFAULT_PROXY_LISTEN,
        upstream_ca: str | None = None,
        limits: Limits | None = None,
        grace: float = DEFAULT_SHUTDOWN_GRACE,
        allow_remote: bool = False,
        observer: ProxyObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = upstream = Target.from_url(api_url, upstream_ca)
        self.clock = clock
        self.limits = limits = limits or Limits()
        self.upstreams = Upstreams(upstream, limits, clock, upstream_ca)
        self.context = ProxyContext(
            target=upstream,
            upstreams=self.upstreams,
            bearer=Bearer(tokens, api_url, clock),
            limits=limits,
            observer=observer or NullObserver(),
            clock=clock,
        )
        self.connections = self.context.connections
        self._listen = listen
        self._grace = grace
        self._allow_remote = allow_remote
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._drained: asyncio.Event | None = None

    @property
    def port(self) -> int:
        """The port listened on (useful with port 0)."""
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        host, port = self._listen
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: ClientConnection(self.context), host, port, reuse_address=True, backlog=1024
        )
        self._schedule_sweep()
        if not is_loopback(host):
            log.warning(
                "the proxy listens on a non-loopback address: anyone who reaches it acts with the "
                "token's access (--proxy-allow-remote)",
                extra={"listen": f"{host}:{self.port}"},
            )
        log.info(
            "proxy serving",
            extra={"listen": f"{host}:{self.port}", "upstream": f"{self.upstream.host}:{self.upstream.port}"},
        )

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish within the grace, then cut the rest."""
        if self._server is None:
            return
        self._server.close()
        self._drained = asyncio.Event()
        self.context.on_empty = self._drained.set
        for conn in list(self.connections):
            conn.shutdown()
        if self.connections:
            log.info("proxy draining", extra={"connections": len(self.connections), "grace": self._grace})
            try:  # asyncio.timeout, not wait_for: on 3.11 wait_for loses a cancel that meets the drain's end
                async with asyncio.timeout(self._grace):
                    await self._drained.wait()
            except TimeoutError:
                log.warning("proxy grace over; closing connections", extra={"left": len(self.connections)})
                for conn in list(self.connections):
                    conn.abort()
        if self._sweeper is not None:
            self._sweeper.cancel()
        self.upstreams.close()
        self._server = None

    def _schedule_sweep(self) -> None:
        interval = min(SWEEP_SECONDS, self.limits.upstream_timeout / 4, self.limits.header_timeout / 4)
        self._sweeper = asyncio.get_running_loop().call_later(max(interval, 0.02), self._sweep)

    def check_timeouts(self) -> None:
        """Apply every connection's timeouts as of now; the server does so every SWEEP_SECONDS."""
        now = self.clock()
        for conn in list(self.connections):
            conn.sweep(now)
        self.upstreams.sweep(now)

    def _sweep(self) -> None:
        self.check_timeouts()
        self._schedule_sweep()
