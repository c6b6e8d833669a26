"""Shared pieces of the security tests: a socket server in front of a fixed token, short socket paths,
loopback servers that record what reaches them on the wire, and the raw-byte fuzzing kit (hypothesis
strategies for hostile requests, a client that reads the answer's head) used on the socket and the
proxy port of a real ``tokenrelay run``."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenrelay.sidecar.localapi import SocketServer
from tokenrelay.sidecar.settings import Settings

from ..support import paths
from ..support.security import (
    API,
    ServeSocket,
    StaticTokens,
    WireServer,
)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A world-traversable directory with a short path (sockets are limited to 108 bytes)."""
    where = paths.short_dir("trs-", 0o755)
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
async def serve_socket(short_dir: Path) -> AsyncIterator[ServeSocket]:
    """Starts the daemon's SocketServer with the given settings in front of StaticTokens."""
    servers: list[SocketServer] = []

    async def start(**settings: Any) -> str:
        tokens = StaticTokens()
        config = Settings(
            auth_url="http://127.0.0.1:9",
            api_url=API,
            identity="x",
            socket=str(short_dir / f"s{len(servers)}.sock"),
            shutdown_grace=0.5,
            **settings,
        )
        server = SocketServer(config, tokens, tokens.ready)
        await server.start()
        servers.append(server)
        return config.socket

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def wire_servers() -> AsyncIterator[Callable[..., Awaitable[WireServer]]]:
    """Starts WireServers; closes them after the test."""
    started: list[WireServer] = []

    async def start(name: str, host: str = "127.0.0.1", port: int = 0) -> WireServer:
        server = await WireServer(name).start(host, port)
        started.append(server)
        return server

    yield start
    for server in started:
        await server.close()
