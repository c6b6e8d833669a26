"""Shared fixtures: an upstream that echoes what it received, real token providers, the proxy."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tokenrelay.proxy import Limits, ProxyServer

from ..support.h2server import H2Echo, H2Proxied
from ..support.proxy import (
    Echo,
    Handler,
    Observed,
    Proxied,
    ServerFactory,
    StartProxy,
    Tokens,
)


@pytest.fixture
async def start_proxy() -> AsyncIterator[StartProxy]:
    started: list[ProxyServer] = []

    async def start(
        api_url: str,
        tokens: Any,
        observer: Any = None,
        upstream_ca: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        **limits: Any,
    ) -> ProxyServer:
        proxy = ProxyServer(
            api_url,
            tokens,
            listen=("127.0.0.1", 0),
            upstream_ca=upstream_ca,
            limits=Limits(**limits),
            grace=5.0,
            observer=observer,
            clock=clock,
        )
        await proxy.start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        await proxy.stop()


@pytest.fixture
async def echo(aiohttp_server: ServerFactory) -> Echo:
    echo = Echo()
    server = await aiohttp_server(echo.app())
    echo.url = f"http://127.0.0.1:{server.port}"
    return echo


@pytest.fixture
async def proxied(echo: Echo, start_proxy: StartProxy) -> AsyncIterator[Proxied]:
    tokens = Tokens()
    api_url = echo.url + "/base"
    providers = tokens.build(api_url)
    observed = Observed()
    proxy = await start_proxy(api_url, providers, observer=observed, upstream_timeout=5.0)
    yield Proxied(echo, tokens, proxy, observed)
    echo.gate.set()


@pytest.fixture
async def raw_upstream() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """A hand-written upstream, for answers aiohttp will not produce."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()


@pytest.fixture
async def h2echo() -> AsyncIterator[H2Echo]:
    echo = H2Echo()
    await echo.start()
    yield echo
    await echo.stop()


@pytest.fixture
async def h2proxied(h2echo: H2Echo, start_proxy: StartProxy) -> H2Proxied:
    """The proxy in front of the HTTP/2 upstream (h2c)."""
    tokens = Tokens()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    observed = Observed()
    proxy = await start_proxy(api_url, tokens.build(api_url), observer=observed, upstream_timeout=5.0)
    return H2Proxied(h2echo, tokens, proxy, observed)
