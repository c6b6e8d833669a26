"""``tokenrelay run``: the sidecar, wired in one place from small parts.

The parts: the token providers (one per audience), the local API on the Unix socket, and the
optional servers (proxy, metrics) that each start and stop on their own. Signals: SIGTERM and SIGINT
stop accepting, let requests in flight finish within --shutdown-grace, remove the socket and return
0; SIGHUP refreshes every token now.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping
from typing import Protocol

import aiohttp
from aiohttp import web

from . import idtoken, localapi, peercred, unixsocket
from .config import Settings
from .exchanger import Exchanger
from .provider import TokenProvider, TokenProviders

log = logging.getLogger("tokenrelay")


class Component(Protocol):
    """Something the daemon starts after the providers and stops before them."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class SocketServer:
    """The local API on the Unix socket."""

    def __init__(self, settings: Settings, providers: TokenProviders) -> None:
        self._settings = settings
        self._runner = web.AppRunner(
            localapi.create_app(providers, providers.ready),
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


def build_providers(settings: Settings, exchanger: Exchanger) -> TokenProviders:
    return TokenProviders(
        [
            TokenProvider(audience, exchanger, wait_timeout=settings.wait_timeout)
            for audience in settings.audiences
        ]
    )


async def serve(
    settings: Settings, *, stop: asyncio.Event | None = None, environ: Mapping[str, str] | None = None
) -> int:
    """Run the sidecar until ``stop`` is set or a signal arrives; the process exit status."""
    stop = stop or asyncio.Event()
    connector = aiohttp.TCPConnector(limit=16, ttl_dns_cache=60)
    async with aiohttp.ClientSession(connector=connector, trust_env=True) as session:
        exchanger = Exchanger(
            session,
            settings.auth_url,
            settings.identity,
            idtoken.from_settings(settings, session, environ),
            timeout=settings.exchange_timeout,
        )
        providers = build_providers(settings, exchanger)
        components: list[Component] = [SocketServer(settings, providers)]
        started: list[Component] = []
        loop = asyncio.get_running_loop()
        _install_signals(loop, stop, providers)
        try:
            providers.start()
            for component in components:
                await component.start()
                started.append(component)
            log.info(
                "serving",
                extra={
                    "socket": settings.socket,
                    "identity": settings.identity,
                    "audiences": list(settings.audiences),
                },
            )
            await stop.wait()
            log.info("stopping", extra={"grace": settings.shutdown_grace})
        finally:
            for component in reversed(started):
                await component.stop()
            await providers.stop()
            _remove_signals(loop)
    log.info("stopped")
    return 0


def _install_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event, providers: TokenProviders) -> None:
    try:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        loop.add_signal_handler(signal.SIGHUP, _on_hangup, providers)
    except (NotImplementedError, RuntimeError):
        pass  # not the main thread (tests run serve() in a thread): the caller sets ``stop``


def _on_hangup(providers: TokenProviders) -> None:
    log.info("SIGHUP: refreshing every token now")
    providers.refresh_all()


def _remove_signals(loop: asyncio.AbstractEventLoop) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(sig)
