"""Request smuggling through a refused Upgrade: the next client's token must never pair with it.

Most servers answer an ``Upgrade`` they do not support with an ordinary 404 or 400 and keep the
connection. If the proxy sent on what the client wrote after its upgrade request, and then pooled that
connection, the smuggled bytes would frame the next client's request (and its injected
``Authorization``) as the body of the attacker's request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tokenrelay.proxy import ProxyServer

from ..support.security import StaticTokens


@dataclass
class Received:
    target: bytes
    body: bytearray = field(default_factory=bytearray, repr=False)  # may hold a token


class RefusingUpstream:
    """Answers every request, Upgrade included, with a keep-alive 404 naming its target.

    It records each request as soon as its head arrives and its body as the bytes come in, so a
    body that never completes (one that swallowed someone else's request) is seen too.
    """

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.connections = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request = Received(head.split(b" ", 2)[1])
                self.received.append(request)
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(request.body) < length:
                    chunk = await reader.read(length - len(request.body))
                    if not chunk:
                        return
                    request.body += chunk
                writer.write(
                    b"HTTP/1.1 404 Not Found\r\nX-Target: %s\r\nContent-Length: 9\r\n\r\nnot found"
                    % request.target
                )
        writer.close()


@pytest.fixture
async def refusing() -> AsyncIterator[tuple[RefusingUpstream, ProxyServer]]:
    upstream = RefusingUpstream()
    await upstream.start()
    api_url = upstream.url + "/base"
    proxy = ProxyServer(api_url, StaticTokens(api_url), listen=("127.0.0.1", 0), grace=1.0)
    await proxy.start()
    yield upstream, proxy
    await proxy.stop()
    upstream.close()


async def exchange(port: int, request: bytes, *, seconds: float = 3.0) -> bytes:
    """``request`` on a new connection; the bytes received until the proxy closes or ``seconds`` pass."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    received = b""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(seconds):
            while chunk := await reader.read(65536):
                received += chunk
                if received.endswith(b"not found") and b"Connection: close" not in received:
                    break
    writer.close()
    return received


async def test_bytes_after_a_refused_upgrade_never_reach_the_upstream(
    refusing: tuple[RefusingUpstream, ProxyServer],
) -> None:
    """A request smuggled behind a refused Upgrade is dropped; the next client gets its own answer."""
    upstream, proxy = refusing
    attack = (
        b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        b"POST /steal HTTP/1.1\r\nHost: attacker.example\r\nContent-Length: 4000\r\n\r\n"
    )
    answer = await exchange(proxy.port, attack)
    assert answer.startswith(b"HTTP/1.1 404 Not Found")
    assert b"Connection: close" in answer  # the attacker's connection ends with the refused upgrade

    victim = await exchange(proxy.port, b"GET /mine HTTP/1.1\r\nHost: x\r\n\r\n", seconds=2.0)
    leaked = [r.target for r in upstream.received if b"Bearer" in r.body]
    assert leaked == [], "the victim's token reached the smuggled request's body"
    assert [r.target for r in upstream.received] == [b"/base/ws", b"/base/mine"]
    assert victim.startswith(b"HTTP/1.1 404 Not Found")
    assert b"X-Target: /base/mine\r\n" in victim


async def test_a_refused_upgrade_never_returns_its_connection_to_the_pool(
    refusing: tuple[RefusingUpstream, ProxyServer],
) -> None:
    """Even with nothing smuggled, the next request goes out on a new upstream connection."""
    upstream, proxy = refusing
    upgrade = b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    assert (await exchange(proxy.port, upgrade)).startswith(b"HTTP/1.1 404")
    for path in (b"/one", b"/two"):
        answer = await exchange(proxy.port, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path)
        assert b"X-Target: /base%s\r\n" % path in answer
    assert upstream.connections == 2  # the upgrade's own, then one pooled for both requests
