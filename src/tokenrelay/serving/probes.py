"""/healthz and /readyz, in one place, and the metrics port that serves them beside /metrics.

Both the local API (on the socket) and the metrics port (on TCP, for the pod network's probes)
answer the same two routes from here. The metrics port never serves a token: only /metrics,
/healthz and /readyz are routed on it, because unlike the socket it is reachable from the network.
prometheus-client is imported only when the metrics port is built: it costs idle memory.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from ..lite import aip193
from ..lite.aip193 import Code
from ..lite.names import DEFAULT_SHUTDOWN_GRACE, where
from .listening import bind_error
from .site import ServingSite

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


class Guard(Protocol):
    """What bounds a listener's connections before aiohttp parses them (agent.connections.Connections)."""

    def protocols(self, server: web.Server) -> Callable[[], asyncio.BaseProtocol]: ...

    def middleware(self) -> Middleware: ...


log = logging.getLogger("tokenrelay.metrics")

READY: web.AppKey[Callable[[], str | None]] = web.AppKey("ready")
_NO_STORE = {"Cache-Control": "no-store"}


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "serving"})


async def readyz(request: web.Request) -> web.Response:
    reason = request.app[READY]()
    if reason is None:
        return web.json_response({"status": "ready"})
    return web.Response(
        status=503,
        body=aip193.encode(Code.UNAVAILABLE, f"not ready: {reason}", "NOT_READY"),
        content_type="application/json",
        headers=_NO_STORE,
    )


def health_routes(app: web.Application, ready: Callable[[], str | None]) -> None:
    """/healthz (the process serves) and /readyz (``ready()`` is None, else it says why not)."""
    app[READY] = ready
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


METRICS_REGISTRY: web.AppKey[CollectorRegistry] = web.AppKey("metrics_registry")


async def serve_metrics(request: web.Request) -> web.Response:
    from prometheus_client.exposition import choose_encoder

    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = encode(request.app[METRICS_REGISTRY])
    # content_type carries its own charset parameter, which web.Response's content_type= refuses
    return web.Response(body=body, headers={"Content-Type": content_type, "Cache-Control": "no-store"})


def create_app(
    registry: CollectorRegistry, ready: Callable[[], str | None], middlewares: Iterable[Middleware] = ()
) -> web.Application:
    """/metrics, /healthz and /readyz; deliberately no /v1/token."""
    app = web.Application(middlewares=middlewares)
    app[METRICS_REGISTRY] = registry
    app.router.add_get("/metrics", serve_metrics)
    health_routes(app, ready)
    return app


class MetricsServer:
    """The daemon Component serving ``create_app`` on --metrics-listen."""

    def __init__(
        self,
        listen: tuple[str, int],
        registry: CollectorRegistry,
        ready: Callable[[], str | None],
        *,
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        guard: Guard | None = None,
    ) -> None:
        self._host, self._port = listen
        self._guard = guard
        self._runner = web.AppRunner(
            create_app(registry, ready, () if guard is None else (guard.middleware(),)),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=shutdown_grace,
        )
        self.port: int | None = None  # the bound port, once started (useful with port 0)

    async def start(self) -> None:
        await self._runner.setup()
        try:
            if self._guard is None:
                await web.TCPSite(self._runner, self._host, self._port).start()
            else:
                family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
                sock = socket.create_server((self._host, self._port), family=family)
                await ServingSite(self._runner, sock, self._guard.protocols).start()
        except OSError as exc:
            await self._runner.cleanup()
            raise bind_error(exc, where("metrics_listen"), self._host, self._port) from None
        self.port = int(self._runner.addresses[0][1])
        log.info("metrics serving", extra={"listen": f"{self._host}:{self.port}"})

    async def stop(self) -> None:
        await self._runner.cleanup()
