"""An HTTP/2 upstream for the proxy's HTTP/2 tests, written on the h2 library (cleartext or TLS with ALPN).

It answers ``/base/download?size=N`` with N bytes (honouring flow control), ``/base/upload`` with the
size of what it received, ``/base/slow`` once ``gate`` is set, a gRPC call (``content-type:
application/grpc``) with its own request body and ``grpc-status: 0`` trailers, and anything else with
what it saw as JSON. A revoked token gets 401, or a trailers-only ``grpc-status: 16`` for gRPC.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, RequestReceived, StreamEnded, StreamReset, WindowUpdated
from h2.exceptions import ProtocolError

from tokenrelay.proxy import ProxyServer
from tokenrelay.testing import jti

from .proxy import Observed, Tokens

Headers = list[tuple[bytes, bytes]]


@dataclass
class H2Echo:
    """The upstream's state, shared by its connections."""

    seen: list[dict[str, Any]] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    resets: int = 0  # streams the proxy reset
    downloaded: int = 0  # bytes sent in answer to /base/download, on every stream
    connections: int = 0  # connections accepted
    port: int = 0
    http1_port: int = 0  # when set, connections that are not HTTP/2 are spliced to this port
    server: asyncio.Server | None = None

    async def start(self, context: ssl.SSLContext | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Conn(self), "127.0.0.1", 0, ssl=context)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.gate.set()
        if self.server is not None:
            self.server.close()


class _Conn(asyncio.Protocol):
    def __init__(self, echo: H2Echo) -> None:
        self.echo = echo
        self.h2 = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        self.transport: asyncio.Transport | None = None
        self.requests: dict[int, tuple[Headers, bytearray]] = {}
        self.sizes: dict[int, int] = {}
        self.digests: dict[int, Any] = {}  # a request body's sha256, whole however long
        self.windows: dict[int, asyncio.Event] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.writable = asyncio.Event()
        self.writable.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.echo.connections += 1
        self.http2: bool | None = None  # decided by the first bytes
        self.spliced: list[bytes] | asyncio.StreamWriter | None = None

    def splice(self, data: bytes) -> None:
        """Not HTTP/2: the bytes go to the HTTP/1.1 server, its answers come back."""
        if isinstance(self.spliced, list):
            self.spliced.append(data)
        elif self.spliced is None:
            self.spliced = [data]
            self.spawn(self._splice())
        else:
            self.spliced.write(data)

    async def _splice(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.echo.http1_port)
        assert isinstance(self.spliced, list) and self.transport is not None
        writer.write(b"".join(self.spliced))
        self.spliced = writer
        while data := await reader.read(65536):
            self.transport.write(data)
        self.transport.close()

    def flush(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.h2.data_to_send())

    def connection_lost(self, exc: Exception | None) -> None:
        for task in self.tasks:
            task.cancel()

    def data_received(self, data: bytes) -> None:
        if self.http2 is None:
            self.http2 = not self.echo.http1_port or data.startswith(b"PRI ")
            if self.http2:
                self.h2.initiate_connection()
        if not self.http2:
            self.splice(data)
            return
        try:
            events = self.h2.receive_data(data)
        except ProtocolError:
            self.flush()
            assert self.transport is not None
            self.transport.close()
            return
        for event in events:
            if isinstance(event, RequestReceived):
                assert event.stream_id is not None and event.headers is not None
                self.requests[event.stream_id] = (event.headers, bytearray())
                self.sizes[event.stream_id] = 0
                self.digests[event.stream_id] = hashlib.sha256()
            elif isinstance(event, DataReceived):
                assert event.stream_id is not None and event.data is not None
                request = self.requests.get(event.stream_id)
                if request is not None:
                    if len(request[1]) < 65536:
                        request[1].extend(event.data)
                    self.sizes[event.stream_id] += len(event.data)
                    self.digests[event.stream_id].update(event.data)
                self.h2.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)
            elif isinstance(event, StreamEnded):
                assert event.stream_id is not None
                self.spawn(self.answer(event.stream_id))
            elif isinstance(event, WindowUpdated):
                for sid, opened in self.windows.items():
                    if not event.stream_id or event.stream_id == sid:
                        opened.set()
            elif isinstance(event, StreamReset):
                self.echo.resets += 1
                self.requests.pop(event.stream_id or 0, None)
        self.flush()

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def answer(self, sid: int) -> None:
        headers, body = self.requests.pop(sid)
        fields = dict(headers)
        # every value: a client's own authorization forwarded beside the proxy's must show
        tokens = [_token(value.decode()) for name, value in headers if name == b"authorization"]
        token = tokens[-1] if tokens else ""
        path = fields[b":path"].decode()
        seen = {
            "method": fields[b":method"].decode(),
            "path": path,
            "authority": fields[b":authority"].decode(),
            "scheme": fields[b":scheme"].decode(),
            "token": token,  # the last authorization value: "tokens" has them all
            "tokens": tokens,
            "headers": [[k.decode(), v.decode()] for k, v in headers if k != b"authorization"],
            "size": self.sizes.pop(sid),
        }
        digest = self.digests.pop(sid).hexdigest()
        self.echo.seen.append(seen)
        grpc = fields.get(b"content-type", b"").startswith(b"application/grpc")
        if token in self.echo.revoked:
            if grpc:
                self.send(
                    sid,
                    [(b":status", b"200"), (b"content-type", b"application/grpc"), (b"grpc-status", b"16")],
                    end=True,
                )
            else:
                self.reply(sid, 401, json.dumps({"code": 16, "message": "token revoked"}).encode())
            return
        url = urlsplit(path)
        if url.path == "/base/slow":
            await self.echo.gate.wait()
            self.reply(sid, 200, b'{"slow": "done"}')
        elif url.path == "/base/download":
            await self.download(sid, int(parse_qs(url.query)["size"][0]))
        elif url.path == "/base/hop":  # fields that describe one connection, beside one that does not
            hop = [(b"proxy-status", b"upstream"), (b"trailer", b"x-late"), (b"x-kept", b"1")]
            self.send(sid, [(b":status", b"204"), *hop], end=True)
        elif url.path == "/base/upload":
            self.reply(sid, 200, json.dumps({"size": seen["size"], "sha256": digest}).encode())
        elif grpc:
            self.send(sid, [(b":status", b"200"), (b"content-type", b"application/grpc")], end=False)
            self.h2.send_data(sid, bytes(body))
            self.send(sid, [(b"grpc-status", b"0"), (b"x-token", token.encode())], end=True)
        else:
            self.reply(sid, 200, json.dumps(seen).encode())

    def send(self, sid: int, headers: Headers, *, end: bool) -> None:
        self.h2.send_headers(sid, headers, end_stream=end)
        self.flush()

    def reply(self, sid: int, status: int, body: bytes) -> None:
        head = [(b":status", b"%d" % status), (b"content-type", b"application/json")]
        self.h2.send_headers(sid, [*head, (b"content-length", b"%d" % len(body))])
        size = self.h2.max_outbound_frame_size  # what it saw may be larger (long header fields)
        for at in range(0, len(body), size):
            self.h2.send_data(sid, body[at : at + size], end_stream=at + size >= len(body))
        self.flush()

    async def download(self, sid: int, size: int) -> None:
        self.send(sid, [(b":status", b"200"), (b"content-length", b"%d" % size)], end=False)
        opened = self.windows[sid] = asyncio.Event()
        sent = 0
        try:
            while sent < size:
                window = self.h2.local_flow_control_window(sid)
                room = min(window, self.h2.max_outbound_frame_size, size - sent, len(_PATTERN) - 256)
                if room <= 0:
                    opened.clear()
                    await opened.wait()
                    continue
                self.h2.send_data(sid, _PATTERN[sent % 256 : sent % 256 + room])
                sent += room
                self.echo.downloaded += room
                self.flush()
                await self.writable.wait()
            self.h2.end_stream(sid)
            self.flush()
        finally:
            del self.windows[sid]


_PATTERN = bytes(range(256)) * 129  # a download's bytes: any slice of up to 32 KiB, from any offset


def download_body(size: int) -> bytes:
    """The bytes ``/base/download?size=N`` answers, whatever frames carried them."""
    return (_PATTERN * (size // len(_PATTERN) + 1))[:size]


def _token(authorization: str) -> str:
    """A token's jti (t1, t2, ...), or the value as it came when it is no token of the scripted exchange."""
    if authorization.startswith("Bearer ey"):
        return jti(authorization.removeprefix("Bearer "))
    return authorization


@dataclass
class H2Proxied:
    echo: H2Echo
    tokens: Tokens
    proxy: ProxyServer
    observed: Observed

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"
