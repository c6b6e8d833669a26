"""Shared pieces of the security tests: a socket server in front of a fixed token, short socket paths."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenrelay.config import Settings
from tokenrelay.daemon import SocketServer
from tokenrelay.errors import UnknownAudience
from tokenrelay.testing import make_jwt
from tokenrelay.token import Token

API = "https://api.example"


class StaticTokens:
    """A TokenSource that always has one long-lived token: the socket's access control under test."""

    def __init__(self) -> None:
        self.token = Token(
            value=make_jwt({"jti": "static", "exp": 4_000_000_000}),
            audience=API,
            received_at=0.0,
            lifetime=1e9,
            refresh_at=1e9,
            expire_wall=4_000_000_000.0,
        )

    @property
    def audiences(self) -> tuple[str, ...]:
        return (API,)

    async def get(self, audience: str) -> Token:
        if audience != API:
            raise UnknownAudience(f"audience {audience!r} is not configured")
        return self.token

    async def reject(self, audience: str, token: Token) -> Token:
        return self.token

    def ready(self) -> str | None:
        return None


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A world-traversable directory with a short path (sockets are limited to 108 bytes)."""
    where = Path(tempfile.mkdtemp(prefix="trs-", dir="/tmp"))
    where.chmod(0o755)
    yield where
    shutil.rmtree(where, ignore_errors=True)


ServeSocket = Callable[..., Awaitable[str]]


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
        server = SocketServer(config, tokens)  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return config.socket

    yield start
    for server in servers:
        await server.stop()
