"""``tokenrelay run``: the sidecar, wired in one place from small parts, apart from its lifecycle.

``build`` is the composition root: from the settings (and the clock, wall, sleep, rng, metrics
registry and environment it is given) it makes the token providers (one per audience), the OIDC
token source, the --token-file sinks, the --render files, and the servers in the order they start:
the metrics port, the proxy, then the local API on the Unix socket. The metrics, the sinks and the
renders hear of every exchange as provider observers; a clean stop takes tokenrelay's entries out of
the --render files. ``Sidecar`` runs what ``build`` made; ``serve`` is ``build`` plus the signals:
SIGTERM and SIGINT stop accepting, let requests in flight finish within --shutdown-grace, remove the
socket and return 0; SIGHUP re-reads the configuration and refreshes every token now. With --once
nothing is served: see ``oneshot``. The chaos tests run the same ``build`` on a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import aiohttp

from .. import outbound
from ..lite.names import where
from ..serving import sinks
from ..serving.clienttls import session_context
from ..serving.listening import bind_error
from ..tokens import idsources as idtoken
from ..tokens.exchanger import Exchanger
from ..tokens.provider import Observer, TokenProvider, TokenProviders
from .localapi import SocketServer
from .memory import Trimmer
from .reloader import Reloader
from .settings import Settings
from .status import StatusBoard

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..proxy import ProxyServer
    from ..render import RenderSink
    from .metrics import Metrics

log = logging.getLogger("tokenrelay")

PROXY_LISTEN_SETTING = where("proxy_listen")
Sleep = Callable[[float], Awaitable[None]]

__all__ = ["Component", "Sidecar", "SocketServer", "build", "id_token_source", "serve"]


class Component(Protocol):
    """Something the daemon starts after the providers and stops before them."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Listener:
    """A component listening on a TCP address the user chose: a failure to bind names the flag."""

    def __init__(self, component: Component, where: str, address: tuple[str, int]) -> None:
        self.component = component
        self._where = where
        self._address = address

    async def start(self) -> None:
        try:
            await self.component.start()
        except OSError as exc:
            raise bind_error(exc, self._where, *self._address) from None

    async def stop(self) -> None:
        await self.component.stop()


class Sidecar:
    """What ``build`` composed, and its lifecycle: ``start``, ``stop``, or ``run`` until told to stop."""

    def __init__(
        self,
        settings: Settings,
        session: aiohttp.ClientSession,
        providers: TokenProviders,
        file_sinks: Sequence[sinks.FileSink],
        components: Sequence[Component],
        *,
        clock: Callable[[], float],
        sleep: Sleep,
        socket: SocketServer | None = None,
        proxy: ProxyServer | None = None,
        trimmer: Trimmer | None = None,
        renders: Sequence[RenderSink] = (),
    ) -> None:
        self.settings = settings
        self.renders = list(renders)
        self.session = session
        self.providers = providers
        self.file_sinks = list(file_sinks)
        self.components = list(components)  # in the order they start
        self.socket = socket
        self.proxy = proxy
        self.trimmer = trimmer
        self._clock = clock
        self._sleep = sleep
        self._started: list[Component] = []

    async def start(self) -> None:
        """Start every server in order, then the providers' schedules. The socket comes last: its
        file appearing is what scripts wait for, so by then the proxy listens too. Every listener
        binds before the first exchange starts: a port already taken fails the start with one line,
        with no exchange to cut short on the way out."""
        for component in self.components:
            await component.start()
            self._started.append(component)
        self.providers.start()

    async def stop(self) -> None:
        """Stop in reverse: on SIGTERM the socket goes first, then the proxy drains, and the metrics
        port answers probes until the end; then the providers, then the --render files lose
        tokenrelay's entries (no refresh can write them again by then), then the HTTP session."""
        try:
            while self._started:
                await self._started.pop().stop()
            await self.providers.stop()
            for render in self.renders:
                render.clear()
        finally:
            if self.trimmer is not None:
                self.trimmer.cancel()
            await self.session.close()

    async def once(self) -> int:
        """--once: one exchange per audience, the sinks written; the exit status."""
        from . import oneshot

        try:
            return await oneshot.run(
                self.providers,
                [*self.file_sinks, *self.renders],
                budget=self.settings.wait_timeout,
                clock=self._clock,
                sleep=self._sleep,
            )
        finally:
            await self.session.close()

    async def run(self, stop: asyncio.Event, listening: asyncio.Event | None = None) -> int:
        """Serve until ``stop`` is set (``listening`` is set once everything listens); exit status 0."""
        if self.settings.once:
            return await self.once()
        try:
            await self.start()
            log.info(
                "serving",
                extra={
                    "socket": self.settings.socket,
                    "identity": self.settings.identity,
                    "audiences": list(self.settings.audiences),
                },
            )
            if listening is not None:
                listening.set()
            await stop.wait()
            log.info("stopping", extra={"grace": self.settings.shutdown_grace})
        finally:
            await self.stop()
        log.info("stopped")
        return 0


def build(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
    registry: CollectorRegistry | None = None,
    environ: Mapping[str, str] | None = None,
    observers: Sequence[Observer] = (),
    proxy_setting: str = PROXY_LISTEN_SETTING,
) -> Sidecar:
    """Compose the sidecar the settings describe; nothing starts. Call within a running event loop.

    ``registry`` holds the metrics (a fresh one when --metrics-listen is set and it is None; none at
    all otherwise); ``observers`` hear of every exchange besides the metrics and the sinks. Raises
    ConfigError when the OIDC token source's inputs are missing.
    """
    env = os.environ if environ is None else environ
    id_token_source(settings, None, env, wall)  # its inputs checked before anything is opened
    rng = rng or random.Random()
    metrics = _metrics(settings, registry, wall)
    file_sinks = sinks.from_settings(settings.token_files, settings.token_file_mode)
    renders = _renders(settings, metrics)
    connector = aiohttp.TCPConnector(limit=16, ttl_dns_cache=60, ssl=session_context())
    session = outbound.session(connector)
    source = id_token_source(settings, session, env, wall)
    board = StatusBoard(lambda: source.description, forward=metrics.id_token if metrics else None)
    exchanger = Exchanger(
        session,
        settings.auth_url,
        settings.identity,
        source,
        timeout=settings.exchange_timeout,
        on_id_token=board.id_token,
    )
    heard: list[Observer] = [*([metrics] if metrics else []), *observers]
    trimmer = None
    if not settings.once:
        heard.extend([*file_sinks, *renders])  # --once writes them itself, once, at the end
        trimmer = Trimmer()  # the idle RSS is the budget: free pages go back after each exchange
        heard.append(trimmer)
    providers = TokenProviders(
        [
            TokenProvider(
                audience,
                exchanger,
                clock=clock,
                wall=wall,
                sleep=sleep,
                rng=random.Random(rng.getrandbits(64)),  # one stream per audience, from one seed
                wait_timeout=settings.wait_timeout,
                observers=heard,
            )
            for audience in settings.audiences
        ]
    )
    components: list[Component] = []
    if metrics and settings.metrics_listen:
        from ..serving.probes import MetricsServer

        components.append(
            MetricsServer(
                settings.metrics_listen,
                metrics.registry,
                providers.ready,
                shutdown_grace=settings.shutdown_grace,
            )
        )
    proxy = None
    if settings.proxy_listen is not None:
        from ..proxy import Limits, ProxyServer

        proxy = ProxyServer(
            settings.api_url,
            providers,
            listen=settings.proxy_listen,
            upstream_ca=settings.upstream_ca,
            limits=Limits.from_settings(settings),
            grace=settings.shutdown_grace,
            allow_remote=settings.proxy_allow_remote,
            observer=metrics.proxy if metrics else None,
            clock=clock,
        )
        components.append(Listener(proxy, proxy_setting, settings.proxy_listen))
    socket = SocketServer(
        settings,
        providers,
        providers.ready,
        metrics.count if metrics else _uncounted,
        lambda: board.document(providers.statuses()),
    )
    components.append(socket)
    return Sidecar(
        settings,
        session,
        providers,
        file_sinks,
        components,
        clock=clock,
        sleep=sleep,
        socket=socket,
        proxy=proxy,
        trimmer=trimmer,
        renders=renders,
    )


def id_token_source(
    settings: Settings,
    session: aiohttp.ClientSession | None,
    environ: Mapping[str, str] | None = None,
    wall: Callable[[], float] = time.time,
) -> idtoken.Source:
    """The OIDC token source the settings name, from the one table; ConfigError when its inputs
    are missing."""
    return idtoken.SOURCES[settings.id_token_source].build(source_inputs(settings, session, environ, wall))


def source_inputs(
    settings: Settings,
    session: aiohttp.ClientSession | None,
    environ: Mapping[str, str] | None = None,
    wall: Callable[[], float] = time.time,
) -> idtoken.SourceInputs:
    """What any source is built from, out of the settings."""
    return idtoken.SourceInputs(
        environ=os.environ if environ is None else environ,
        audience=settings.id_token_audience or settings.auth_url,
        id_token_file=settings.id_token_file,
        id_token_env=settings.id_token_env,
        settings={
            name: str(value)
            for name in idtoken.SOURCE_SETTINGS
            if (value := getattr(settings, name)) is not None
        },
        timeout=settings.exchange_timeout,
        session=session,
        wall=wall,
    )


async def serve(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    listening: asyncio.Event | None = None,
    environ: Mapping[str, str] | None = None,
    reload: Callable[[], Settings] | None = None,
    registry: CollectorRegistry | None = None,
    proxy_setting: str = PROXY_LISTEN_SETTING,
) -> int:
    """Run the sidecar until ``stop`` is set or a signal arrives; the process exit status.

    ``listening`` is set once the socket and every server listen; ``reload`` gives the settings anew
    (SIGHUP); ``registry`` holds the metrics (a fresh one if None); ``proxy_setting`` is what a
    failure to bind the proxy names (``tokenrelay dev`` has a flag of its own).
    """
    stop = stop or asyncio.Event()
    sidecar = build(settings, registry=registry, environ=environ, proxy_setting=proxy_setting)
    if settings.once:
        return await sidecar.once()
    loop = asyncio.get_running_loop()
    hangup = Reloader(settings, reload, sidecar.providers, sidecar.file_sinks, sidecar.renders)
    _install_signals(loop, stop, hangup)
    try:
        return await sidecar.run(stop, listening)
    finally:
        _remove_signals(loop)


def _metrics(
    settings: Settings, registry: CollectorRegistry | None, wall: Callable[[], float]
) -> Metrics | None:
    """Metrics only when someone can read them: prometheus-client costs 1 MiB of idle RSS."""
    if settings.metrics_listen is None and registry is None:
        return None
    from prometheus_client import CollectorRegistry

    from .metrics import Metrics

    return Metrics(registry or CollectorRegistry(), settings.audiences, wall=wall)


def _renders(settings: Settings, metrics: Metrics | None) -> list[RenderSink]:
    """The --render sinks; the render package loads only when there are some."""
    if not settings.render:
        return []
    from ..render import from_settings

    return from_settings(settings, metrics.render if metrics else None)


def _uncounted(via: str) -> None:
    """The local API's request counter when no metrics are kept."""


def _install_signals(
    loop: asyncio.AbstractEventLoop, stop: asyncio.Event, hangup: Callable[[], None]
) -> None:
    try:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        loop.add_signal_handler(signal.SIGHUP, hangup)
    except (NotImplementedError, RuntimeError):
        pass  # not the main thread (tests run serve() in a thread): the caller sets ``stop``


def _remove_signals(loop: asyncio.AbstractEventLoop) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(sig)
