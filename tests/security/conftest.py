"""Shared pieces of the security tests: a socket server in front of a fixed token, short socket paths,
loopback servers that record what reaches them on the wire."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httptools
import pytest

from tokenrelay.config import Settings
from tokenrelay.daemon import SocketServer
from tokenrelay.errors import UnknownAudience
from tokenrelay.testing import make_jwt
from tokenrelay.token import Token

API = "https://api.example"


class StaticTokens:
    """A TokenSource that always has one long-lived token: the socket's access control under test."""

    def __init__(self, audience: str = API) -> None:
        self.audience = audience
        self.token = Token(
            value=make_jwt({"jti": "static", "exp": 4_000_000_000}),
            audience=audience,
            received_at=0.0,
            lifetime=1e9,
            refresh_at=1e9,
            expire_wall=4_000_000_000.0,
        )

    @property
    def audiences(self) -> tuple[str, ...]:
        return (self.audience,)

    async def get(self, audience: str) -> Token:
        if audience != self.audience:
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


@dataclass
class Seen:
    """One request as it arrived on the wire."""

    method: bytes
    target: bytes
    headers: list[tuple[bytes, bytes]] = field(repr=False)  # may hold the token: kept out of output

    def header(self, name: bytes) -> list[bytes]:
        return [value for key, value in self.headers if key.lower() == name.lower()]


class WireServer:
    """A loopback HTTP server that records every connection and every request exactly as received.

    It parses with httptools, as little as possible, so that the target it records is the bytes the
    peer sent; every request gets a small 200 with keep-alive.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.connections = 0
        self.received = b""  # every byte, in case something reaches it that is not HTTP
        self.requests: list[Seen] = []
        self._server: asyncio.Server | None = None
        self.host = ""
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> WireServer:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _WireConnection(self), host, port)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]
        return self

    @property
    def authority(self) -> str:
        return f"{self.host}:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


class _WireConnection(asyncio.Protocol):
    def __init__(self, server: WireServer) -> None:
        self._server = server
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._server.connections += 1

    def data_received(self, data: bytes) -> None:
        self._server.received += data
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            assert self._transport is not None
            self._transport.close()

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_message_complete(self) -> None:
        self._server.requests.append(Seen(self._parser.get_method(), self._url, self._headers))
        body = self._server.name.encode()
        assert self._transport is not None
        self._transport.write(
            b"HTTP/1.1 200 OK\r\nX-Served-By: %s\r\nContent-Length: %d\r\n\r\n%s" % (body, len(body), body)
        )


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
