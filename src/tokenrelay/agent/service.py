"""``tokenrelay agent``, wired in one place: the cluster's keys, the node's pods, the keyed
exchanges, the local API on the socket (and TCP with --listen), the metrics port.

Start-up, in order: the metrics port (liveness answers from the first moment and never depends on
the token service), the cluster's keys (retried until loaded), the pod watch's first list, then the
socket. The agent is ready once the socket serves; then, with --startup-taint, it removes the
``tokenrelay.dev/agent-not-ready`` taint from its node, so that no pod is scheduled here before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry

from .. import outbound
from ..errors import ConfigError
from ..lite.names import where
from ..serving import unixsocket
from ..serving.clienttls import session_context
from ..serving.listening import bind_error
from ..serving.probes import MetricsServer
from ..serving.site import ServingSite
from ..tokens import sts
from ..tokens.sts import Issued
from . import cluster
from .api import Agent, create_app
from .checks import Checks
from .connections import ConnectionLimits, Connections
from .exchanges import Exchanges
from .jwks import ClusterKeys, KeysUnavailable, Load
from .limiter import ExchangeLimiter
from .metrics import AgentMetrics
from .options import AgentSettings
from .pods import NodePods, watch
from .podtoken import Verifier
from .ratelimit import ConnectionRates, Gcra

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from lightkube.config.kubeconfig import SingleConfig

log = logging.getLogger("tokenrelay.agent")

Sleep = Callable[[float], Awaitable[None]]
PodSource = Callable[[NodePods], Awaitable[None]]


class NodeAgent:
    """The running agent: ``start``, ``stop``, ``ready``."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        kube: SingleConfig | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        keys: Load | None = None,
        pod_source: PodSource | None = None,
    ) -> None:
        """``keys`` and ``pod_source`` stand in for the API server (the chaos tests): the JWKS's
        loader, and what fills ``pods`` (by default, the watch of this node's pods)."""
        self.settings = settings
        self._kube = kube
        self._pod_source = pod_source
        self._rng = rng or random.Random()
        self._sleep = sleep
        self.pods = NodePods(clock, sleep)
        self.registry = registry or CollectorRegistry()
        self.metrics = AgentMetrics(
            self.registry, pods=lambda: len(self.pods), connections=lambda: len(self.connections)
        )
        limits = ConnectionLimits(
            settings.head_timeout,
            settings.idle_timeout,
            settings.max_connections,
            settings.max_connections_per_peer,
        )
        self.connections = Connections(
            limits,
            clock=clock,
            sleep=sleep,
            on_refused=self.metrics.refused,
            on_closed=self.metrics.timed_out,
        )
        # --metrics-listen is on the pod network, open to every pod of the cluster: bounded the same
        self.metrics_connections = Connections(
            limits,
            clock=clock,
            sleep=sleep,
            on_refused=self.metrics.refused,
            on_closed=self.metrics.timed_out,
        )
        if keys is not None:
            load = keys
        elif settings.cluster_jwks_file:
            load = cluster.file_keys(settings.cluster_jwks_file)
        else:
            load = cluster.api_keys(self._kube_config())
        self.keys = ClusterKeys(load, clock=clock)
        connector = aiohttp.TCPConnector(limit=64, ttl_dns_cache=60, ssl=session_context())
        self.session = outbound.session(connector)
        self.limiter = ExchangeLimiter(
            settings.max_exchanges_per_second, clock=clock, sleep=sleep, on_wait=self.metrics.waited
        )
        self.exchanges = Exchanges(
            self._exchange,
            self.pods,
            self.limiter,
            max_entries=settings.max_cache_entries,
            wait_timeout=settings.wait_timeout,
            account_rate=settings.max_exchanges_per_account,
            refusal_ttl=settings.refusal_ttl,
            clock=clock,
            wall=wall,
            sleep=sleep,
            rng=self._rng,
            observers=(self.metrics,),
            on_size=self.metrics.entries,
        )
        self._wall = wall
        self._clock = clock
        self._serving = False
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self._metrics: MetricsServer | None = None
        self._inode: int | None = None
        self.client: AsyncClient | None = None
        self.tcp_port: int | None = None
        self.agent: Agent | None = None

    def _kube_config(self) -> SingleConfig:
        if self._kube is None:
            self._kube = cluster.kube_config()
        return self._kube

    async def _exchange(self, audience: str, identity: str, pod_token: str) -> Issued:
        s = self.settings
        return await sts.exchange(
            self.session, s.auth_url, audience, identity, pod_token, timeout=s.exchange_timeout
        )

    def ready(self) -> str | None:
        if not self.keys.loaded:
            return "the cluster's service-account keys are not loaded yet"
        if not self.pods.synced:
            return "the node's pods are not listed yet"
        if not self._serving:
            return "the socket does not serve yet"
        return None

    async def start(self) -> None:
        s = self.settings
        if s.metrics_listen is not None:
            self._metrics = MetricsServer(
                s.metrics_listen,
                self.registry,
                self.ready,
                shutdown_grace=s.shutdown_grace,
                guard=self.metrics_connections,
            )
            await self._metrics.start()
            self._tasks.append(asyncio.ensure_future(self.metrics_connections.run()))
        if self._pod_source is None or s.startup_taint or not s.cluster_issuer:
            from lightkube import AsyncClient

            self.client = AsyncClient(config=self._kube_config())
        issuer = s.cluster_issuer or await self._retry(
            "the cluster's issuer", lambda: cluster.issuer(self._kube_config())
        )
        await self._retry("the cluster's keys", self.keys.refresh)
        if self._pod_source is not None:
            self._tasks.append(asyncio.ensure_future(self._pod_source(self.pods)))
        else:
            assert self.client is not None
            self._tasks.append(asyncio.ensure_future(watch(self.client, s.node_name, self.pods, self._rng)))
        self._tasks.append(asyncio.ensure_future(self.exchanges.run()))
        self._tasks.append(asyncio.ensure_future(self.connections.run()))
        self._tasks.append(asyncio.ensure_future(self.keys.run(s.cluster_jwks_refresh, self._sleep)))
        await self.pods.listed.wait()
        verifier = Verifier(self.keys, issuer=issuer, audience=s.audience, node=s.node_name, wall=self._wall)
        rates = ConnectionRates(s.max_requests_per_connection, self._clock)
        pod_rates = Gcra(s.max_requests_per_pod, s.pod_request_burst, self._clock)
        checks = Checks.build(verifier, self.pods, self.exchanges, s.api_url)
        agent = Agent(checks, self.exchanges, self.metrics, rates, pod_rates)
        self._runner = web.AppRunner(
            create_app(agent, self.ready, (self.connections.middleware(),)),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=s.shutdown_grace,
        )
        await self._runner.setup()
        if s.listen is not None:
            try:
                tcp = socket.create_server(
                    s.listen, family=socket.AF_INET6 if ":" in s.listen[0] else socket.AF_INET
                )
            except OSError as exc:
                raise bind_error(exc, where("listen"), *s.listen) from None
            await ServingSite(self._runner, tcp, self.connections.protocols).start()
            self.tcp_port = int(self._runner.addresses[-1][1])
        sock = unixsocket.bind(s.socket, s.socket_mode)
        self._inode = unixsocket.inode(s.socket)
        await ServingSite(self._runner, sock, self.connections.protocols).start()
        self.agent = agent
        self._serving = True
        log.info(
            "serving",
            extra={"socket": s.socket, "node": s.node_name, "issuer": issuer, "podTokenAudience": s.audience},
        )
        if s.startup_taint:
            self._tasks.append(asyncio.ensure_future(self._untaint()))

    async def _retry(self, what: str, step: Callable[[], Awaitable[str | None]]) -> str:
        failures = 0
        while True:
            try:
                return await step() or ""
            except KeysUnavailable as exc:
                failures += 1
                delay = self._rng.uniform(0.5, min(30.0, 2.0**failures))
                log.warning(f"cannot load {what}", extra={"error": str(exc), "retryIn": round(delay, 2)})
                await self._sleep(delay)

    async def _untaint(self) -> None:
        assert self.client is not None
        failures = 0
        while True:
            try:
                removed = await cluster.remove_startup_taint(self.client, self.settings.node_name)
                log.info("start-up taint", extra={"removed": removed, "taint": cluster.STARTUP_TAINT})
                return
            except Exception as exc:  # lightkube's ApiError (a 422 when the taints changed, RBAC), httpx's
                failures += 1
                delay = self._rng.uniform(0.5, min(30.0, 2.0**failures))
                log.warning(
                    "cannot remove the start-up taint", extra={"error": f"{type(exc).__name__}: {exc}"}
                )
                await self._sleep(delay)

    async def stop(self) -> None:
        self._serving = False
        if self._inode is not None:
            unixsocket.remove(self.settings.socket, self._inode)
        if self._runner is not None:
            await self._runner.cleanup()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.exchanges.stop()
        if self._metrics is not None:
            await self._metrics.stop()
        if self.client is not None:
            await self.client.close()
        await self.session.close()


async def serve(settings: AgentSettings) -> int:
    """Run the agent until SIGTERM or SIGINT; exit status 0."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    agent = NodeAgent(settings)
    try:
        starting = asyncio.ensure_future(agent.start())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # a ConfigError (a port taken, a socket that cannot be bound) ends here
            await stopping
        else:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        log.info("stopping", extra={"grace": settings.shutdown_grace})
    finally:
        await agent.stop()
    log.info("stopped")
    return 0


__all__ = ["ConfigError", "NodeAgent", "serve"]
