"""``tokenrelay run``: the sidecar, wired in one place from small parts.

The parts: the token providers (one per audience), the local API on the Unix socket, and the
optional servers (proxy, metrics) that each start and stop on their own; the metrics and the
--token-file sinks hear of every exchange as provider observers. Signals: SIGTERM and SIGINT stop
accepting, let requests in flight finish within --shutdown-grace, remove the socket and return 0;
SIGHUP re-reads the configuration and refreshes every token now. With --once nothing is served: see
``oneshot``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
from aiohttp import web

from . import idtoken, localapi, oneshot, peercred, sinks, unixsocket
from .config import Settings
from .exchanger import Exchanger
from .listening import bind_error
from .provider import Observer, TokenProvider, TokenProviders
from .reloader import Reloader
from .status import StatusBoard

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .metrics import Metrics

log = logging.getLogger("tokenrelay")

PROXY_LISTEN_SETTING = "--proxy-listen (env TOKENRELAY_PROXY_LISTEN)"


class Component(Protocol):
    """Something the daemon starts after the providers and stops before them."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class SocketServer:
    """The local API on the Unix socket."""

    def __init__(
        self,
        settings: Settings,
        providers: TokenProviders,
        count: Callable[[str], None] = lambda via: None,
        status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._settings = settings
        self._runner = web.AppRunner(
            localapi.create_app(providers, providers.ready, count, status),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=settings.shutdown_grace,
        )
        self._inode: int | None = None

    async def start(self) -> None:
        sock = unixsocket.bind(self._settings.socket, self._settings.socket_mode)
        self._inode = unixsocket.inode(self._settings.socket)
        await self._runner.setup()
        policy = peercred.Policy(self._settings.socket_allow_uid, self._settings.socket_allow_gid)
        site = (
            peercred.GuardedSockSite(self._runner, sock, policy)
            if policy.active
            else web.SockSite(self._runner, sock)
        )
        await site.start()

    async def stop(self) -> None:
        # Unlink first so that new clients fail fast instead of reaching a closing server.
        if self._inode is not None:
            unixsocket.remove(self._settings.socket, self._inode)
        await self._runner.cleanup()


class Listener:
    """A component listening on a TCP address the user chose: a failure to bind names the flag."""

    def __init__(self, component: Component, where: str, address: tuple[str, int]) -> None:
        self._component = component
        self._where = where
        self._address = address

    async def start(self) -> None:
        try:
            await self._component.start()
        except OSError as exc:
            raise bind_error(exc, self._where, *self._address) from None

    async def stop(self) -> None:
        await self._component.stop()


def build_providers(
    settings: Settings, exchanger: Exchanger, observers: Sequence[Observer] = ()
) -> TokenProviders:
    return TokenProviders(
        [
            TokenProvider(audience, exchanger, wait_timeout=settings.wait_timeout, observers=observers)
            for audience in settings.audiences
        ]
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
    metrics = _metrics(settings, registry)
    observers: list[Observer] = [metrics] if metrics else []
    file_sinks = sinks.from_settings(settings.token_files, settings.token_file_mode)
    connector = aiohttp.TCPConnector(limit=16, ttl_dns_cache=60)
    async with aiohttp.ClientSession(connector=connector, trust_env=True) as session:
        id_tokens = idtoken.from_settings(settings, session, environ)
        board = StatusBoard(id_tokens.description, forward=metrics.id_token if metrics else None)
        exchanger = Exchanger(
            session,
            settings.auth_url,
            settings.identity,
            id_tokens,
            timeout=settings.exchange_timeout,
            on_id_token=board.id_token,
        )
        if settings.once:
            providers = build_providers(settings, exchanger, observers)
            return await oneshot.run(providers, file_sinks, budget=settings.wait_timeout)
        providers = build_providers(settings, exchanger, [*observers, *file_sinks])
        # Started in this order and stopped in reverse. The socket comes last: its file appearing
        # is what scripts wait for, so by then the proxy listens too; on SIGTERM it goes first,
        # then the proxy drains, and the metrics port answers probes until the end.
        components: list[Component] = []
        if metrics and settings.metrics_listen:
            from .metrics import MetricsServer

            components.append(
                MetricsServer(
                    settings.metrics_listen,
                    metrics.registry,
                    providers.ready,
                    shutdown_grace=settings.shutdown_grace,
                )
            )
        if settings.proxy_listen is not None:
            from .proxy import ProxyServer

            components.append(
                Listener(
                    ProxyServer.from_settings(settings, providers, metrics.proxy if metrics else None),
                    proxy_setting,
                    settings.proxy_listen,
                )
            )
        components.append(
            SocketServer(
                settings,
                providers,
                metrics.count if metrics else _uncounted,
                lambda: board.document(providers.statuses()),
            )
        )
        started: list[Component] = []
        loop = asyncio.get_running_loop()
        _install_signals(loop, stop, Reloader(settings, reload, providers, file_sinks))
        try:
            # Every listener binds before the first exchange starts: a port already taken then
            # fails the start with one line, with no exchange to cut short on the way out.
            for component in components:
                await component.start()
                started.append(component)
            providers.start()
            log.info(
                "serving",
                extra={
                    "socket": settings.socket,
                    "identity": settings.identity,
                    "audiences": list(settings.audiences),
                },
            )
            if listening is not None:
                listening.set()
            await stop.wait()
            log.info("stopping", extra={"grace": settings.shutdown_grace})
        finally:
            for component in reversed(started):
                await component.stop()
            await providers.stop()
            _remove_signals(loop)
    log.info("stopped")
    return 0


def _metrics(settings: Settings, registry: CollectorRegistry | None) -> Metrics | None:
    """Metrics only when someone can read them: prometheus-client costs 1 MiB of idle RSS."""
    if settings.metrics_listen is None and registry is None:
        return None
    from prometheus_client import CollectorRegistry

    from .metrics import Metrics

    return Metrics(registry or CollectorRegistry(), settings.audiences)


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
