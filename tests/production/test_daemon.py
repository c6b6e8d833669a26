"""The running sidecar (the installed ``tokenrelay run``): metrics port, token file, SIGHUP."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tokenrelay.lite.redact import fingerprint
from tokenrelay.lite.socketclient import fetch_token
from tokenrelay.testing import jti

from ..support.production import Upstream, free_port, require_tool, run_args
from ..support.waiting import eventually

pytestmark = pytest.mark.e2e


@dataclass
class Daemon:
    process: asyncio.subprocess.Process
    log: Path

    def log_text(self) -> str:
        return self.log.read_text()


@asynccontextmanager
async def daemon(args: list[str], log: Path) -> AsyncIterator[Daemon]:
    """``tokenrelay`` running with ``args``; stopped with SIGTERM, which must exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            require_tool("tokenrelay"), *args, env=env, stdout=sink, stderr=sink
        )
    running = Daemon(process, log)
    try:
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        status = await asyncio.wait_for(process.wait(), 20)
    assert status == 0, running.log_text()


def file_jti(path: Path) -> str | None:
    try:
        return jti(path.read_text())
    except (OSError, ValueError, IndexError, KeyError):
        return None


async def test_metrics_port_of_a_running_sidecar(
    upstream: Upstream, id_token_file: Path, tmp_path: Path
) -> None:
    """--metrics-listen serves readiness and counts the exchange and the socket's token requests."""
    port = free_port()
    sock = tmp_path / "relay.sock"
    args = run_args(upstream, id_token_file, "--socket", str(sock), "--metrics-listen", f"127.0.0.1:{port}")
    base = f"http://127.0.0.1:{port}"
    async with daemon(args, tmp_path / "log") as running, aiohttp.ClientSession() as session:

        async def ready() -> bool:
            try:
                async with session.get(base + "/readyz") as response:
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        for _ in range(750):
            if await ready():
                break
            assert running.process.returncode is None, running.log_text()
            await asyncio.sleep(0.02)
        else:
            pytest.fail("never ready: " + running.log_text())
        reply = await asyncio.to_thread(fetch_token, str(sock))
        assert fingerprint(reply.token) == fingerprint(upstream.service.issued[0])
        async with session.get(base + "/v1/token") as response:
            assert response.status == 404
            assert reply.token not in await response.text()
        async with session.get(base + "/metrics") as response:
            text = await response.text()
    api = "https://api.example.test"
    assert f'tokenrelay_exchanges_total{{audience="{api}",result="success"}} 1.0' in text
    assert 'tokenrelay_token_requests_total{via="socket"} 1.0' in text
    assert "tokenrelay_id_token_expiry_timestamp_seconds " in text
    assert reply.token not in text


@dataclass
class Reloadable:
    """A running ``tokenrelay run`` with a --config file and a --token-file."""

    running: Daemon
    config: Path
    token_file: Path

    async def hang_up(self, config_text: str) -> None:
        """Write ``config_text`` to --config, send SIGHUP, and wait for the token its refresh writes."""
        self.config.write_text(config_text)
        self.running.process.send_signal(signal.SIGHUP)
        await eventually(lambda: file_jti(self.token_file) == "t2", "a new token after SIGHUP")


@asynccontextmanager
async def reloadable(
    upstream: Upstream, id_token_file: Path, tmp_path: Path, config_text: str
) -> AsyncIterator[Reloadable]:
    """``tokenrelay run`` reading --config (``config_text`` at start), once its first token is in its
    --token-file."""
    config = tmp_path / "tokenrelay.toml"
    config.write_text(config_text)
    token_file = tmp_path / "api-token"
    files = ["--config", str(config), "--token-file", str(token_file)]
    args = run_args(upstream, id_token_file, *files, "--socket", str(tmp_path / "relay.sock"))
    async with daemon(args, tmp_path / "log") as running:
        await eventually(lambda: file_jti(token_file) == "t1", "the first token in the file")
        yield Reloadable(running, config, token_file)


async def test_sighup_rereads_config_and_refreshes(
    upstream: Upstream, id_token_file: Path, tmp_path: Path
) -> None:
    """SIGHUP re-reads --config (a new --token-file-mode applies) and writes a newly exchanged token."""
    async with reloadable(upstream, id_token_file, tmp_path, 'token_file_mode = "0600"\n') as relay:
        assert stat.S_IMODE(relay.token_file.stat().st_mode) == 0o600
        await relay.hang_up('token_file_mode = "0640"\nlog_level = "debug"\n')
        assert stat.S_IMODE(relay.token_file.stat().st_mode) == 0o640
        assert upstream.service.calls == 2
        running = relay.running
        await eventually(lambda: "configuration reloaded" in running.log_text(), "the reload log line")
    log = running.log_text()
    assert "token_file_mode" in log
    for token in upstream.service.issued:
        assert token not in log


async def test_sighup_with_a_broken_config_keeps_running(
    upstream: Upstream, id_token_file: Path, tmp_path: Path
) -> None:
    """A config file broken since start is reported on SIGHUP; the sidecar keeps going and refreshes."""
    async with reloadable(upstream, id_token_file, tmp_path, 'log_level = "info"\n') as relay:
        await relay.hang_up("log_level = [broken\n")
        assert "configuration not reloaded" in relay.running.log_text()
