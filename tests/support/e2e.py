"""The end-to-end suite's stack: the emulator, an installed `tokenrelay run` and its proxy in front."""

from __future__ import annotations

import asyncio
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from tokenrelay.emulator import Emulator

BIN = Path(sys.executable).parent
SUBJECT = "system:serviceaccount:shop:checkout"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Stack:
    emulator: Emulator
    url: str
    org: str
    identity: str
    socket: str
    proxy: str
    process: asyncio.subprocess.Process


async def run(*argv: str | Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def sidecar(
    tmp_path: Path, url: str, identity: str, proxy_port: int
) -> tuple[str, asyncio.subprocess.Process]:
    sock = str(tmp_path / "tokenrelay.sock")
    process = await asyncio.create_subprocess_exec(
        BIN / "tokenrelay",
        "run",
        "--auth-url",
        url,
        "--api-url",
        url,
        "--identity",
        identity,
        "--id-token-file",
        str(tmp_path / "oidc-token"),
        "--socket",
        sock,
        "--proxy-listen",
        f"127.0.0.1:{proxy_port}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    # The socket appears first; the proxy listens a moment later: wait for both.
    for _ in range(500):
        if Path(sock).exists() and await accepts(proxy_port):
            return sock, process
        if process.returncode is not None:
            break
        await asyncio.sleep(0.02)
    process.kill()
    raise AssertionError("tokenrelay run did not start")


async def accepts(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True
