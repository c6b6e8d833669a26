"""Shared fixtures: an upstream that echoes what it received, real token providers, the proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tokenrelay.proxy import Limits, ProxyServer

from ..support.proxy import (
    Echo,
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
        api_url: str, tokens: Any, observer: Any = None, upstream_ca: str | None = None, **limits: Any
    ) -> ProxyServer:
        proxy = ProxyServer(
            api_url,
            tokens,
            listen=("127.0.0.1", 0),
            upstream_ca=upstream_ca,
            limits=Limits(**limits),
            grace=5.0,
            observer=observer,
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
