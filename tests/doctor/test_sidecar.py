"""The doctor's sidecar checks and ``tokenrelay status`` / ``GET /v1/status``, against a real
``tokenrelay run`` (and a real socket with the wrong mode)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenrelay.doctor.report import Outcome
from tokenrelay.lite import aip193
from tokenrelay.lite.redact import fingerprint
from tokenrelay.lite.socketclient import request
from tokenrelay.testing import FakeTokenService, refusal

from ..support.doctor import BIN, Platform, command, doctor, finding, sidecar
from ..support.helpers import require
from ..support.paths import require_reachable

pytestmark = pytest.mark.e2e


async def test_a_running_sidecar_serves_each_audience(
    platform: Platform, environ: dict[str, str], tmp_path: Path
) -> None:
    """With a sidecar up, the doctor sees its socket, its audiences and a token for each, and a host
    whose audience the sidecar does not keep fails naming --audience."""
    sock = tmp_path / "relay.sock"
    args = platform.argv("--audience", "registry.example.test")
    async with sidecar(args, sock, tmp_path / "log"):
        environ = {
            **environ,
            "TOKENRELAY_SOCKET": str(sock),
            "TOKENRELAY_HOSTS": "registry.example.test,git.example.test",
        }
        report = await doctor([], environ)
    assert finding(report, "sidecar.permissions").outcome is Outcome.PASSED
    assert "registry.example.test" in finding(report, "sidecar.connect").message
    token = finding(report, "sidecar.token.1")
    assert token.outcome is Outcome.PASSED and "expires" in token.message
    audiences = finding(report, "clients.audiences")
    assert audiences.outcome is Outcome.FAILED
    assert audiences.fix is not None and "--audience git.example.test" in audiences.fix
    assert all(t not in report.text() + report.json() for t in platform.tokens)


async def test_status_shows_each_audience_and_the_endpoint_never_a_token(
    platform: Platform, tmp_path: Path
) -> None:
    """`tokenrelay status` (table and --json) and GET /v1/status show fingerprints, expiries and the last
    exchange, and never a token."""
    sock = tmp_path / "relay.sock"
    async with sidecar(platform.argv(), sock, tmp_path / "log"):
        token = (await command(str(BIN / "tokenrelay"), "token", "--socket", str(sock))).stdout.strip()
        status, body = await asyncio.to_thread(request, str(sock), "/v1/status", 10.0)
        table = (await command(str(BIN / "tokenrelay"), "status", "--socket", str(sock))).stdout
        as_json = (await command(str(BIN / "tokenrelay"), "status", "--json", "--socket", str(sock))).stdout
    assert status == 200
    document = json.loads(body)
    assert json.loads(as_json)["audiences"][0]["audience"] == document["audiences"][0]["audience"]
    entry = document["audiences"][0]
    assert entry["audience"] == platform.url
    assert entry["fingerprint"] == fingerprint(token)
    assert entry["lastExchange"]["outcome"] == "ok"
    assert entry["consecutiveFailures"] == 0 and entry["state"] == "fresh"
    assert entry["nextRefreshInSeconds"] > 0
    assert document["idToken"]["expireTime"] is not None
    assert document["uptimeSeconds"] >= 0
    assert fingerprint(token) in table and "LAST EXCHANGE" in table
    for shown in (body.decode(), table, as_json):
        assert token not in shown
        assert all(t not in shown for t in platform.tokens)


async def test_status_shows_failures_and_the_backoff(
    aiohttp_server: Callable[..., Awaitable[TestServer]], tmp_path: Path
) -> None:
    """A token service that refuses shows in `tokenrelay status --json` as a failed last exchange, a
    failure count, the service's words and a backoff."""
    service = FakeTokenService()

    async def refuse(request: web.Request) -> web.StreamResponse | None:
        return refusal(aip193.Code.PERMISSION_DENIED, "claimMatch says no", 403)

    service.behaviour = refuse
    server = await aiohttp_server(service.app())
    url = str(server.make_url("")).rstrip("/")
    token_file = tmp_path / "t"
    token_file.write_text("opaque-oidc-token")
    sock = tmp_path / "relay.sock"
    args = [
        "--auth-url",
        url,
        "--api-url",
        "https://api.example.test",
        "--identity",
        "org/ci",
        "--id-token-file",
        str(token_file),
    ]
    async with sidecar(args, sock, tmp_path / "log"):
        # The service counts a call before the sidecar has read the refusal, and the full-jitter
        # backoff may draw (nearly) zero, or be spent while a retry runs: ask until the status shows
        # a failure with the sidecar holding back its next attempt.
        for _ in range(400):
            result = await command(str(BIN / "tokenrelay"), "status", "--json", "--socket", str(sock))
            entry = json.loads(result.stdout)["audiences"][0]
            if entry["consecutiveFailures"] >= 1 and entry["backoffSeconds"] > 0:
                break
            await asyncio.sleep(0.05)
        table = (await command(str(BIN / "tokenrelay"), "status", "--socket", str(sock))).stdout
    assert entry["lastExchange"]["outcome"] == "failed"
    assert "claimMatch says no" in entry["lastExchange"]["error"]
    assert entry["consecutiveFailures"] >= 1
    assert entry["backoffSeconds"] > 0
    assert entry["fingerprint"] is None and entry["state"] == "none"
    assert "claimMatch says no" in table


def test_status_without_a_sidecar_says_how_to_start_one(tmp_path: Path) -> None:
    """`tokenrelay status` with nothing at the socket prints one line naming TOKENRELAY_SOCKET, exit 1."""
    result = subprocess.run(
        [str(BIN / "tokenrelay"), "status", "--socket", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "TOKENRELAY_SOCKET" in result.stderr


def _as_other_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    require_reachable(65534, BIN / "tokenrelay")
    return [require("setpriv"), "--reuid", "65534", "--regid", "65534", "--clear-groups"]


def test_a_socket_this_user_cannot_open_names_the_mode_fix() -> None:
    """A real socket whose mode shuts this user out fails sidecar.permissions, naming --socket-mode and
    the owner (run as another user when the test runs as root)."""
    with tempfile.TemporaryDirectory() as directory:
        Path(directory).chmod(0o755)
        path = Path(directory) / "relay.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        path.chmod(0o600 if os.geteuid() == 0 else 0o000)
        try:
            result = subprocess.run(
                [*_as_other_user(), str(BIN / "tokenrelay"), "doctor", "--json"],
                env={"HOME": directory, "PATH": str(BIN), "TOKENRELAY_SOCKET": str(path)},
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
        finally:
            server.close()
    assert result.returncode == 1, result.stderr
    check = next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "sidecar.permissions")
    assert check["status"] == "failed"
    assert "--socket-mode 0660" in check["fix"] and "may not connect" in check["message"]


async def test_a_peer_allow_list_that_leaves_this_user_out_names_the_flag(
    platform: Platform, tmp_path: Path
) -> None:
    """A sidecar whose --socket-allow-uid leaves the caller out fails sidecar.connect, naming the flag
    with the caller's uid."""
    directory = Path(tempfile.mkdtemp())
    directory.chmod(0o755)
    sock = directory / "relay.sock"
    caller = 65534 if os.geteuid() == 0 else os.geteuid()
    allowed = "0" if os.geteuid() == 0 else str(os.geteuid() + 1)
    platform.token_file.chmod(0o644)
    args = platform.argv("--socket-mode", "0666", "--socket-allow-uid", allowed)
    async with sidecar(args, sock, tmp_path / "log"):
        result = await command(
            *_as_other_user(),
            str(BIN / "tokenrelay"),
            "doctor",
            "--json",
            env={"HOME": str(directory), "PATH": str(BIN), "TOKENRELAY_SOCKET": str(sock)},
        )
    assert result.returncode == 1, result.stderr
    check = next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "sidecar.connect")
    assert check["status"] == "failed"
    assert f"--socket-allow-uid {caller}" in check["fix"]
