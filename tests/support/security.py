"""The security suite's pieces: a fixed-token socket server, a raw wire server, a token service on
http.server, and the hostile inputs the fuzzers draw from.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httptools
from hypothesis import strategies as st

from tokenrelay.testing import StaticTokenSource, make_jwt

API = "https://api.example"


class StaticTokens(StaticTokenSource):
    """A TokenSource that always has one long-lived token: the socket's access control under test."""

    def __init__(self, audience: str = API) -> None:
        super().__init__(audience, make_jwt({"jti": "static", "exp": 4_000_000_000}))


ServeSocket = Callable[..., Awaitable[str]]


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


class TokenService(http.server.BaseHTTPRequestHandler):
    """A stdlib token service in a thread: the daemon under test is a separate process."""

    def do_GET(self) -> None:
        now = int(time.time())
        self._answer(make_jwt({"jti": "fuzz", "iat": now, "exp": now + 3600}))

    def _answer(self, token: str) -> None:
        body = json.dumps({"token": token}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


Address = str | tuple[str, int]  # a Unix socket's path, or (host, port)


def send_head(address: Address, payload: bytes) -> bytes:
    """Send ``payload`` and read the answer's head (up to the blank line), or b"" when closed without one.

    The connection stays open for writing: a client that half-closes gets no answer from aiohttp,
    which would make every case pass vacuously.
    """
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(address)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(payload)
        sock.settimeout(1)
        try:
            return read_head(sock)
        except TimeoutError:
            # Still waiting for the rest of a request (e.g. after bare CRLFs, which HTTP lets a
            # server skip): stop sending; it must then close, not hang on.
            sock.settimeout(10)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            return read_head(sock)


def status_of(head: bytes) -> int | None:
    if not head:
        return None
    first = head.split(b"\r\n", 1)[0].split(b" ")
    # aiohttp echoes the version it parsed, so a mangled request line can get "HTTP/0.9 404":
    # still a status line and a 4xx, which is what a client needs.
    assert first[0].startswith(b"HTTP/"), first
    return int(first[1])


def send(address: Address, payload: bytes) -> int | None:
    """Send ``payload``; the answer's status, or None when closed without one."""
    return status_of(send_head(address, payload))


def read_head(sock: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
    return data.split(b"\r\n\r\n", 1)[0]


def rss(process: subprocess.Popen[bytes]) -> int:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


methods = st.sampled_from(
    [b"GET", b"POST", b"HEAD", b"DELETE", b"OPTIONS", b"CONNECT", b"G\x00T", b"", b"get"]
)


targets = st.one_of(
    st.sampled_from(
        [
            b"/v1/token",
            b"/v1/token?audience=https%3A%2F%2Fapi.example",
            b"/v1/token?audience=%ff%fe",
            b"http://evil.example/v1/token",
            b"//evil.example/v1/token",
            b"/../../etc/passwd",
            b"/v1/%2e%2e/%2e%2e/healthz",
            b"/v1%2ftoken",
            b"*",
            b"/readyz",
            b"/" + b"a" * 70000,
        ]
    ),
    st.binary(max_size=60),
)


versions = st.sampled_from(
    [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/9.9", b"", b"HTTP/1.1 extra", b"\xff"]
)


header_names = st.one_of(
    st.sampled_from([b"Host", b"Accept", b"Content-Length", b"Transfer-Encoding"]), st.binary(max_size=20)
)


header_values = st.one_of(
    st.sampled_from(
        [b"text/plain", b"-1", b"99999999999999999999", b"chunked", b"a\r\nInjected: 1", b"a\rb", b"\xc3\x28"]
    ),
    st.binary(max_size=40),
)


def hostile_requests(
    targets: st.SearchStrategy[bytes] = targets, methods: st.SearchStrategy[bytes] = methods
) -> st.SearchStrategy[bytes]:
    """Request-shaped bytes with every part liable to be broken."""
    return st.builds(
        lambda method, target, version, headers, many, body: (
            method
            + b" "
            + target
            + b" "
            + version
            + b"\r\n"
            + b"".join(n + b": " + v + b"\r\n" for n, v in headers)
            + b"X-Many: 1\r\n" * many
            + b"\r\n"
            + body
        ),
        methods,
        targets,
        versions,
        st.lists(st.tuples(header_names, header_values), max_size=6),
        st.sampled_from([0, 0, 0, 150, 5000]),
        st.binary(max_size=30),
    )


def hostile_payloads(requests: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Hostile requests, or random bytes ending like a request head."""
    return st.one_of(requests, st.binary(max_size=300).map(lambda raw: raw + b"\r\n\r\n"))


OVERSIZED = [
    b"GET /v1/token HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n",
    b"GET /v1/token HTTP/1.1\r\nHost: x\r\n" + b"X-Many: 1\r\n" * 20000 + b"\r\n",
    b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\n\r\n",
]


OVERSIZED_IDS = ["1MiB-header", "20000-headers", "1MiB-target"]
