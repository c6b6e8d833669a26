"""10,000 proxied requests from 64 concurrent clients while the token rotates every few seconds.

The whole sidecar runs as ``daemon.serve`` (providers on the real clock, the exchange over HTTP, the
local API and the proxy wired by the daemon) against a token service whose tokens live 6 s, so the
token rotates about every 3 s of the run; the upstream refuses any token that was not issued or has
expired. Logs go through the chaos suite's secret check like every other test here.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tokenrelay.sidecar import daemon
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import FakeClock, FakeTokenService

from ..support.chaos import IDENTITY, Api, CaptureHandler, Secrets, oidc_token
from ..support.paths import short_dir

REQUESTS = 10_000
CLIENTS = 64
LIFETIME = 6.0  # refreshed at 45-50% of it: a new token every 2.7-3 s
MIN_TOKENS = 3  # the run goes on until the upstream has seen this many: at least two rotations
DEADLINE = 120.0  # real seconds; a guard against a hang, far above the few seconds it takes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Sidecar:
    service: FakeTokenService
    url: str  # the proxy


@pytest.fixture
async def sidecar(api: Api, secrets: Secrets) -> AsyncIterator[Sidecar]:
    """``daemon.serve`` in this process, its proxy in front of ``api``, tokens living LIFETIME seconds."""
    service = FakeTokenService(lifetime=LIFETIME)
    secrets.services.append(service)
    sts = TestServer(service.app())
    await sts.start_server()
    where = short_dir()
    token_file = where / "oidc-token"
    oidc = oidc_token(FakeClock())  # its wall clock starts at the real time
    secrets.extra.append(oidc)
    token_file.write_text(oidc)
    port = free_port()
    settings = Settings(
        auth_url=str(sts.make_url("")).rstrip("/"),
        api_url=api.url + "/base",
        identity=IDENTITY,
        socket=str(where / "s.sock"),
        id_token_file=str(token_file),
        proxy_listen=("127.0.0.1", port),
        shutdown_grace=1.0,
    )
    stop = asyncio.Event()
    serving = asyncio.ensure_future(daemon.serve(settings, stop=stop))
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            deadline = time.monotonic() + 20
            while True:
                assert not serving.done(), "daemon.serve ended early"
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(url + "/ready") as response:
                        if response.status == 200:
                            break
                assert time.monotonic() < deadline, "the proxy did not start serving"
                await asyncio.sleep(0.05)
        yield Sidecar(service, url)
    finally:
        stop.set()
        assert await asyncio.wait_for(serving, 10) == 0
        await sts.close()


async def test_ten_thousand_proxied_requests_while_tokens_rotate(
    sidecar: Sidecar, api: Api, no_secret_in_logs: CaptureHandler
) -> None:
    """64 clients make at least 10,000 requests through the proxy across at least two token rotations:
    every one gets the upstream's 200, the upstream accepted every bearer (issued, not expired), and
    there was one exchange per token the upstream saw (give or take the one just issued)."""
    statuses: dict[int, int] = {}
    done = 0
    started = time.monotonic()

    def finished() -> bool:
        return done >= REQUESTS and len(api.accepted) >= MIN_TOKENS

    connector = aiohttp.TCPConnector(limit=CLIENTS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(number: int) -> None:
            nonlocal done
            while not finished():
                assert time.monotonic() - started < DEADLINE, "the load did not finish"
                async with session.get(f"{sidecar.url}/v1/things/{number}") as response:
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                done += 1

        await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    elapsed = time.monotonic() - started
    issued = {f"t{i}" for i in range(1, len(sidecar.service.issued) + 1)}
    failed = sum(count for status, count in statuses.items() if status != 200)
    print(
        f"\nproxied={done} non_2xx={failed} exchanges={sidecar.service.calls} "
        f"tokens_seen={len(api.accepted)} refused_by_upstream={len(api.refused)} wall_s={elapsed:.1f}"
    )
    assert statuses == {200: done}
    assert api.refused == []
    assert set(api.accepted) <= issued
    assert len(api.accepted) >= MIN_TOKENS
    assert sidecar.service.calls == len(sidecar.service.issued)  # every exchange succeeded
    assert len(issued) - len(api.accepted) <= 1  # no stampede: one exchange per rotation
    # The secret check saw the sidecar's own records, the proxy's among them.
    loggers = {name for name, _ in no_secret_in_logs.lines}
    assert {"tokenrelay", "tokenrelay.provider", "tokenrelay.proxy"} <= loggers
