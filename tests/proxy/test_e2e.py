"""The installed ``tokenrelay run --proxy-listen``, driven as a user would: curl, big bodies, SIGTERM."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tokenrelay.testing import FakeTokenService, make_jwt

from ..support.proxy import Echo, ServerFactory

pytestmark = pytest.mark.e2e

MiB = 1024 * 1024
BIG = 200 * MiB
TOKENRELAY = Path(sys.executable).parent / "tokenrelay"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def refused(url: str) -> None:
    """Return once nothing accepts connections at ``url`` any more."""
    host, port = url.removeprefix("http://").split(":")
    deadline = time.monotonic() + 10
    while True:
        try:
            _, writer = await asyncio.open_connection(host, int(port))
        except OSError:
            return
        writer.close()
        assert time.monotonic() < deadline, "the proxy still accepts connections"
        await asyncio.sleep(0.01)


@dataclass
class Sidecar:
    process: asyncio.subprocess.Process
    url: str


@pytest.fixture
async def sidecar(echo: Echo, aiohttp_server: ServerFactory, tmp_path: Path) -> AsyncIterator[Sidecar]:
    sts = await aiohttp_server(FakeTokenService().app())
    port = free_port()
    env = dict(os.environ, OIDC=make_jwt({"sub": "ci", "exp": int(time.time()) + 3600}))
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        env.pop(name, None)
    process = await asyncio.create_subprocess_exec(
        str(TOKENRELAY),
        "run",
        "--auth-url", f"http://127.0.0.1:{sts.port}",
        "--api-url", f"{echo.url}/base",
        "--identity", "identities/ci",
        "--id-token-env", "OIDC",
        "--socket", str(tmp_path / "tokenrelay.sock"),
        "--proxy-listen", f"127.0.0.1:{port}",
        "--shutdown-grace", "20",
        env=env,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(url + "/ready") as response:
                    if response.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            assert time.monotonic() < deadline, "the sidecar's proxy did not come up"
            await asyncio.sleep(0.05)
    echo.seen.clear()
    yield Sidecar(process, url)
    echo.gate.set()
    if process.returncode is None:
        process.terminate()
        await process.wait()


async def test_curl_through_the_installed_sidecar(sidecar: Sidecar, echo: Echo) -> None:
    """Plain curl gets the upstream's answer; the upstream got the sidecar's token, not curl's."""
    if shutil.which("curl") is None:
        if os.environ.get("CI"):
            pytest.fail("curl is required in CI")
        pytest.skip("curl is not installed")
    curl = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--fail", "-H", "Authorization: Bearer not-this-one", "--data-binary", "hi",
        f"{sidecar.url}/v1/things?page=2",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await curl.communicate()
    assert curl.returncode == 0
    assert b'"path": "/base/v1/things?page=2"' in out
    assert b'"body": "hi"' in out
    assert echo.seen[-1]["token"] == "t1"


async def test_large_bodies_stream_with_flat_memory(sidecar: Sidecar) -> None:
    """200 MiB up (chunked) and 200 MiB down pass through while the sidecar's memory stays flat."""
    before = peak_rss(sidecar.process.pid)
    block = b"\xa5" * MiB

    async def upload() -> AsyncIterator[bytes]:
        for _ in range(BIG // MiB):
            yield block

    async with aiohttp.ClientSession() as session:
        async with session.post(sidecar.url + "/upload", data=upload()) as response:
            assert (await response.json())["size"] == BIG
        async with session.get(sidecar.url + f"/download?size={BIG}") as response:
            received = 0
            async for chunk in response.content.iter_any():
                received += len(chunk)
        assert received == BIG
    growth = peak_rss(sidecar.process.pid) - before
    print(f"peak RSS growth: {growth / MiB:.1f} MiB")
    assert growth < 48 * MiB, f"the sidecar's peak memory grew by {growth // MiB} MiB"


async def test_sigterm_drains_the_request_in_flight(sidecar: Sidecar, echo: Echo) -> None:
    """SIGTERM while a request is in flight: it still gets its answer, then the sidecar exits 0."""
    async with aiohttp.ClientSession() as session:
        in_flight = asyncio.ensure_future(session.get(sidecar.url + "/slow"))
        deadline = time.monotonic() + 10
        while not echo.seen:
            assert time.monotonic() < deadline, "the request never reached the upstream"
            await asyncio.sleep(0.01)
        sidecar.process.send_signal(signal.SIGTERM)
        await refused(sidecar.url)  # the signal has landed: new connections are no longer accepted
        echo.gate.set()
        response = await in_flight
        assert response.status == 200
        assert await response.json() == {"slow": "done"}
    assert await asyncio.wait_for(sidecar.process.wait(), 20) == 0
