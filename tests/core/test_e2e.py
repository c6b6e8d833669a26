"""The installed commands, run as a user runs them: `tokenrelay run` and `tokenrelay token`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.testing import FakeTokenService, make_jwt

from ..support.waiting import eventually

BIN = Path(sys.executable).parent
API = "https://api.example.test"

pytestmark = pytest.mark.e2e


@dataclass
class Sidecar:
    process: asyncio.subprocess.Process
    socket: str
    service: FakeTokenService

    async def token(self, *args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            BIN / "tokenrelay",
            "token",
            "--socket",
            self.socket,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode(), err.decode()


def _listening(path: str, process: asyncio.subprocess.Process) -> bool:
    if process.returncode is not None:
        raise AssertionError(f"tokenrelay run exited with {process.returncode}")
    return os.path.exists(path)


@pytest.fixture
async def sidecar(
    aiohttp_server: Callable[..., Awaitable[TestServer]], tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Sidecar]:
    service = FakeTokenService()
    if getattr(request, "param", {}).get("hold"):
        service.gate = asyncio.Event()  # exchanges hang from the start until the test releases them
    server = await aiohttp_server(service.app())
    oidc = tmp_path / "oidc-token"
    oidc.write_text(make_jwt({"sub": "system:serviceaccount:ci:app", "exp": 4102444800}))
    socket = str(tmp_path / "run" / "tokenrelay.sock")
    process = await asyncio.create_subprocess_exec(
        BIN / "tokenrelay",
        "run",
        "--auth-url",
        str(server.make_url("")),
        "--api-url",
        API,
        "--identity",
        "org/ci",
        "--id-token-file",
        str(oidc),
        "--socket",
        socket,
        "--log-level",
        "debug",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TOKENRELAY_AUDIENCE": "registry.example.test"},
    )
    await eventually(lambda: _listening(socket, process), "the socket to appear", timeout=10)
    yield Sidecar(process, socket, service)
    if process.returncode is None:
        process.kill()
        await process.wait()


async def test_run_then_token_prints_the_token(sidecar: Sidecar) -> None:
    """`tokenrelay token` prints the sidecar's current token and a newline, exit 0."""
    code, out, err = await sidecar.token()
    assert code == 0 and err == ""
    assert out.endswith("\n") and out.strip() in sidecar.service.issued
    assert _claims(out)["aud"] == API
    code, out, _ = await sidecar.token("--audience", "registry.example.test")
    assert code == 0 and _claims(out)["aud"] == "registry.example.test"


def _claims(token: str) -> dict[str, object]:
    claims = unverified_claims(token.strip())
    assert claims is not None
    return claims


async def test_token_for_unconfigured_audience_is_one_clear_line(sidecar: Sidecar) -> None:
    """Asking for an audience the sidecar does not keep: exit 1, one line naming --audience."""
    code, out, err = await sidecar.token("--audience", "nope.example")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "--audience nope.example" in err


@pytest.mark.parametrize("sidecar", [{"hold": True}], indirect=True)
async def test_sigterm_drains_then_exits_cleanly(sidecar: Sidecar) -> None:
    """A request in flight at SIGTERM still gets its token; then exit 0 and the socket is gone."""
    assert sidecar.service.gate is not None
    reader, writer = await asyncio.open_unix_connection(sidecar.socket)
    writer.write(b"GET /v1/token HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(0.3)  # sequencing across processes: let the sidecar pick the request up
    sidecar.process.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.3)  # the signal lands while the request waits for the exchange
    assert sidecar.process.returncode is None
    sidecar.service.gate.set()
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200")
    assert _claims(json.loads(answer.partition(b"\r\n\r\n")[2])["token"])["aud"] == API
    assert await asyncio.wait_for(sidecar.process.wait(), 15) == 0
    assert not os.path.exists(sidecar.socket)


async def test_logs_are_json_lines_without_secrets(sidecar: Sidecar) -> None:
    """Every stderr line is a JSON object; no issued token or OIDC token appears, even at debug."""
    await sidecar.token()
    sidecar.process.send_signal(signal.SIGTERM)
    _, stderr = await sidecar.process.communicate()
    text = stderr.decode()
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["msg"] for line in lines if line["msg"] in ("serving", "token refreshed")]
    for secret in sidecar.service.issued + sidecar.service.seen_id_tokens:
        assert secret not in text


async def test_no_sidecar_is_one_clear_line(tmp_path: Path) -> None:
    """`tokenrelay token` with nothing listening says what to start or set, exit 1."""
    proc = await asyncio.create_subprocess_exec(
        BIN / "tokenrelay",
        "token",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TOKENRELAY_SOCKET": str(tmp_path / "none.sock")},
    )
    out, err = await proc.communicate()
    assert proc.returncode == 1 and out == b""
    assert err.decode().count("\n") == 1
    assert b"start `tokenrelay run`" in err and b"TOKENRELAY_SOCKET" in err


async def test_bad_configuration_exits_2_with_one_line() -> None:
    """A missing required setting: exit 2, one line naming the flag and the variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    proc = await asyncio.create_subprocess_exec(
        BIN / "tokenrelay",
        "run",
        "--api-url",
        API,
        "--identity",
        "org/ci",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 2
    assert (
        err.decode().splitlines() == [err.decode().strip()]
        and "--auth-url (env TOKENRELAY_AUTH_URL) is required" in err.decode()
    )


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
async def test_run_leaves_frozenlists_cxx_extension_unloaded(sidecar: Sidecar) -> None:
    """`tokenrelay run` takes frozenlist's pure-Python twin: its C++ extension (and libstdc++, 1 MiB
    of idle RSS) is not mapped into the sidecar."""
    code, _, _ = await sidecar.token()
    assert code == 0
    maps = Path(f"/proc/{sidecar.process.pid}/maps").read_text()
    assert "aiohttp" in maps  # the sidecar is up, aiohttp's own extensions loaded
    assert "_frozenlist" not in maps
