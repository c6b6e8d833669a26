"""A real relay (providers, local API on a Unix socket) against a real fake token service, on a fake clock.

``relay`` is the daemon's own composition (``daemon.build``) with the schedule on a FakeClock:
``await relay.advance(seconds)`` moves time and waits until every exchange has finished and every
background loop is asleep again (``Relay.settings`` is what ``daemon.serve`` would get). With
``proxy=True`` the proxy hangs off it too, in front of ``Api``: a loopback upstream that accepts a
bearer only if a token service of the test issued it and it has not expired on that service's clock.

Every chaos test runs under ``no_secret_in_logs``: every log record at DEBUG, from any logger, is
rendered raw (message, extras, traceback; before any scrubbing) and searched for every token the
fake token service issued and every OIDC token written for the test.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tokenrelay.sidecar import daemon
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import Behaviour, FakeClock, FakeTokenService

from ..support.chaos import (
    API,
    IDENTITY,
    SERVICE_AHEAD,
    Api,
    CaptureHandler,
    InFlight,
    Relay,
    RelayFactory,
    Secrets,
    assert_no_secret,
    oidc_token,
)
from ..support.paths import short_dir


@pytest.fixture
def secrets() -> Secrets:
    return Secrets()


@pytest.fixture(autouse=True)
def no_secret_in_logs(secrets: Secrets) -> Iterator[CaptureHandler]:
    """Fails the test when any token or OIDC token it handled shows up in any log record."""
    handler = CaptureHandler()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert_no_secret(handler.lines, secrets.values())


@pytest.fixture
async def api(secrets: Secrets) -> AsyncIterator[Api]:
    api = Api(secrets)
    server = TestServer(api.app())
    await server.start_server()
    api.url = str(server.make_url("")).rstrip("/")
    yield api
    await server.close()


@pytest.fixture
async def relay_factory(secrets: Secrets) -> AsyncIterator[RelayFactory]:
    """Builds relays; tears every piece down after the test."""
    cleanups: list[Callable[[], Awaitable[None]]] = []
    dirs: list[Path] = []

    async def build(
        *,
        lifetime: float = 600.0,
        exchange_timeout: float = 5.0,
        wait_timeout: float = 5.0,
        seed: int = 7,
        start: bool = True,
        audiences: tuple[str, ...] = (),
        api_url: str = API,
        proxy: bool = False,
        behaviour: Behaviour | None = None,
        clock: FakeClock | None = None,
        environ: dict[str, str] | None = None,
        **settings: Any,
    ) -> Relay:
        clock = clock or FakeClock()
        service_offset = time.time() + SERVICE_AHEAD - clock.now
        # The service's clock is its own: a jump of our wall clock does not move it.
        service = FakeTokenService(
            lifetime=lifetime, wall=lambda: clock.now + service_offset, behaviour=behaviour
        )
        secrets.services.append(service)
        server = TestServer(service.app())
        await server.start_server()
        cleanups.append(server.close)
        where = short_dir()
        dirs.append(where)
        token_file = where / "oidc-token"
        first = oidc_token(clock)
        secrets.extra.append(first)
        token_file.write_text(first)
        fetch = InFlight(clock)
        config = Settings(
            auth_url=str(server.make_url("")).rstrip("/"),
            api_url=api_url,
            identity=IDENTITY,
            audience=audiences,
            socket=str(where / "s.sock"),
            id_token_file=str(token_file),
            exchange_timeout=exchange_timeout,
            wait_timeout=wait_timeout,
            shutdown_grace=1.0,
            proxy_listen=("127.0.0.1", 0) if proxy else None,
            **settings,
        )
        # The daemon's own composition, on the fake clock.
        sidecar = daemon.build(
            config,
            clock=clock,
            wall=clock.wall,
            sleep=clock.sleep,
            rng=random.Random(seed),
            environ=environ or {},
            observers=[fetch.observer()],
        )
        providers = fetch.providers = sidecar.providers
        client = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=config.socket, limit=128))
        cleanups.append(client.close)
        proxy_client = aiohttp.ClientSession()
        cleanups.append(proxy_client.close)
        relay = Relay(clock, service, fetch, providers, config, token_file, client, proxy_client, secrets)
        relay.proxy = sidecar.proxy
        if start:
            await sidecar.start()
            cleanups.append(sidecar.stop)
            await relay.settle()
        else:
            cleanups.append(sidecar.session.close)
        return relay

    yield build
    for cleanup in reversed(cleanups):
        with contextlib.suppress(Exception):
            await cleanup()
    for where in dirs:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
async def relay(relay_factory: RelayFactory) -> Relay:
    return await relay_factory()
