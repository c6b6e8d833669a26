"""HTTP/2 on the emulator's port: gRPC calls answered in-process, every other request relayed to the HTTP API.

The real API answers gRPC and HTTP/JSON at one host, over HTTP/2 as well as HTTP/1.1; so does the
emulator, so that an HTTP/2 client (curl --http2-prior-knowledge, httpx, tokenrelay's proxy talking h2c
to an ``http://`` upstream) reaches the same API whatever it sends. The ``h2`` state machine does the
protocol; this module only routes streams:

- ``content-type: application/grpc*``: a unary method of ``methods`` (one message in, one out, errors
  as trailers-only answers with ``grpc-status-details-bin``), or the reflection stream;
- anything else: the request, buffered (bounded), is made on the emulator's HTTP/1.1 API and the
  answer streamed back with HTTP/2 flow control.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import struct
import zlib
from collections.abc import Callable, Coroutine
from typing import cast

import aiohttp
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from grpc_reflection.v1alpha import reflection_pb2
from yarl import URL

from . import reflection
from .methods import Methods

MAX_STREAMS = 100
MAX_HEADER_LIST = 64 * 1024
MAX_MESSAGE = 4 * 1024 * 1024  # grpc's default receive limit
MAX_BODY = 32 * 1024 * 1024  # a relayed HTTP request (registry blobs go over HTTP/1.1 in practice)
CHUNK = 64 * 1024

# RFC 9113 §8.2.2: meaningless in HTTP/2, and never relayed either way
CONNECTION_SPECIFIC = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "host"}
)
NO_CONNECT = b'{"code": 12, "message": "Unimplemented: CONNECT is not served", "details": []}'
TOO_LARGE = b'{"code": 3, "message": "Invalid argument: body: over 32 MiB", "details": []}'
GRPC_HEADERS = [
    (":status", "200"),
    ("content-type", "application/grpc"),
    ("grpc-accept-encoding", "identity,gzip,deflate"),
]


class Stream:
    """One request: its headers, its body so far (or its gRPC messages), and the task answering it."""

    __slots__ = ("body", "buffer", "grpc", "headers", "id", "inbox", "inflated", "size", "task")

    def __init__(self, stream_id: int, headers: dict[str, str]) -> None:
        self.id = stream_id
        self.headers = headers
        self.grpc = headers.get("content-type", "").startswith("application/grpc")
        self.body: list[bytes] = []  # a relayed request's body
        self.buffer = bytearray()  # gRPC: the part of a message received so far
        self.size = 0
        self.inflated = 0  # gRPC: bytes of the messages taken, decompressed (over MAX_MESSAGE: refused)
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()  # gRPC messages; None: the end
        self.task: asyncio.Task[None] | None = None


class H2Front(asyncio.Protocol):
    """One HTTP/2 connection of the emulator's port."""

    def __init__(
        self,
        methods: Methods,
        reflector: reflection.Reflection,
        relay: Callable[[], aiohttp.ClientSession],
        base_url: Callable[[], str],
        connections: set[H2Front],
    ) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self._conn = h2.connection.H2Connection(config)
        self._methods = methods
        self._reflector = reflector
        self._relay = relay
        self._base_url = base_url
        self._connections = connections
        self._transport: asyncio.Transport | None = None
        self._streams: dict[int, Stream] = {}
        self._window: dict[int, asyncio.Future[None]] = {}
        self._closed = False

    # -- asyncio ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._connections.add(self)
        self._conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_STREAMS,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST,
            },
        )
        self._conn.initiate_connection()
        self._flush()

    def data_received(self, data: bytes) -> None:
        try:
            events = self._conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self._flush()  # h2 queued the GOAWAY naming the error
            self.close()
            return
        for event in events:
            self._on(event)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._connections.discard(self)
        for stream in self._streams.values():
            if stream.task is not None:
                stream.task.cancel()
        self._streams.clear()
        self._wake_all()

    def close(self) -> None:
        """GOAWAY, then close: streams in flight are cancelled."""
        if self._transport is not None and not self._closed:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self._conn.close_connection()
                self._flush()
            self._transport.close()

    # -- events ----------------------------------------------------------------------------------

    def _on(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            headers = {str(name): str(value) for name, value in event.headers or ()}
            self._request(event.stream_id, headers, ended=event.stream_ended is not None)
        elif isinstance(event, h2.events.DataReceived):
            self._conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            stream = self._streams.get(event.stream_id)
            if stream is not None and event.data:
                self._body(stream, event.data)
        elif isinstance(event, h2.events.StreamEnded):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                self._ended(stream)
        elif isinstance(event, h2.events.StreamReset):
            stream = self._streams.pop(event.stream_id, None)
            if stream is not None and stream.task is not None:
                stream.task.cancel()
            self._wake(event.stream_id)
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            stream_id = getattr(event, "stream_id", 0)
            if stream_id:
                self._wake(stream_id)
            else:
                self._wake_all()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.close()

    def _request(self, stream_id: int, headers: dict[str, str], ended: bool) -> None:
        stream = Stream(stream_id, headers)
        self._streams[stream_id] = stream
        if headers.get(":method") == "CONNECT":
            self._start(
                stream, self._answer_plain(stream, 405, b'{"code": 12, "message": "CONNECT is not served"}')
            )
        elif stream.grpc:
            self._start(stream, self._grpc(stream))
        if ended:
            self._ended(stream)

    def _body(self, stream: Stream, data: bytes) -> None:
        stream.size += len(data)
        if stream.grpc:
            if stream.inflated > MAX_MESSAGE:
                return  # already refused: the rest of the stream is only read, not kept
            stream.buffer += data
            self._take_messages(stream)
        elif stream.size <= MAX_BODY:
            stream.body.append(data)

    def _ended(self, stream: Stream) -> None:
        if stream.grpc:
            stream.inbox.put_nowait(None)
        elif stream.task is None:
            self._start(stream, self._relay_http(stream))

    def _start(self, stream: Stream, work: Coroutine[object, object, None]) -> None:
        stream.task = asyncio.get_running_loop().create_task(self._run(stream, work))

    async def _run(self, stream: Stream, work: Coroutine[object, object, None]) -> None:
        try:
            await work
        except (h2.exceptions.StreamClosedError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or reset the stream
        finally:
            self._streams.pop(stream.id, None)

    # -- gRPC ------------------------------------------------------------------------------------

    def _take_messages(self, stream: Stream) -> None:
        """Move each complete length-prefixed message received to the stream's inbox.

        A stream holds at most MAX_MESSAGE bytes of messages, counted after decompression: a unary
        call has one message, and reflection's are tiny, so more is a client to refuse, not to buffer.
        """
        data = stream.buffer
        while len(data) >= 5:
            compressed, length = struct.unpack(">?I", data[:5])
            if length > MAX_MESSAGE:
                self._refuse_as_too_big(stream)
                return
            if len(data) < 5 + length:
                return
            message = bytes(data[5 : 5 + length])
            del data[: 5 + length]
            if compressed:
                room = MAX_MESSAGE - stream.inflated
                message = _decompress(stream.headers.get("grpc-encoding", ""), message, room)
            stream.inflated += len(message)
            if stream.inflated > MAX_MESSAGE:
                self._refuse_as_too_big(stream)
                return
            stream.inbox.put_nowait(message)

    @staticmethod
    def _refuse_as_too_big(stream: Stream) -> None:
        stream.inbox.put_nowait(TOO_BIG)
        stream.buffer.clear()
        stream.inflated = MAX_MESSAGE + 1

    async def _grpc(self, stream: Stream) -> None:
        path = stream.headers.get(":path", "")
        if path == reflection.PATH:
            await self._reflect(stream)
            return
        method = self._methods.by_path.get(path)
        if method is None:
            await self._trailers_only(stream, status_pb2.Status(code=12, message=f"Unimplemented: {path}"))
            return
        messages: list[bytes] = []
        while (message := await stream.inbox.get()) is not None:
            messages.append(message)
        refusal = _refusal(messages)
        if refusal is not None:
            await self._trailers_only(stream, refusal)
            return
        result = await self._methods.call(
            method, messages[0], stream.headers.get("authorization"), _grpc_timeout(stream.headers)
        )
        if isinstance(result, status_pb2.Status):
            await self._trailers_only(stream, result)
            return
        self._conn.send_headers(stream.id, GRPC_HEADERS)
        await self._send(stream.id, _frame(result), end=False)
        self._conn.send_headers(stream.id, [("grpc-status", "0")], end_stream=True)
        self._flush()

    async def _reflect(self, stream: Stream) -> None:
        self._conn.send_headers(stream.id, GRPC_HEADERS)
        self._flush()
        while (message := await stream.inbox.get()) is not None:
            request = reflection_pb2.ServerReflectionRequest()
            refusal = _refusal([message])
            if refusal is None:
                try:
                    request.ParseFromString(message)
                except DecodeError:
                    refusal = status_pb2.Status(
                        code=13, message="Internal error: the request does not decode"
                    )
            if refusal is not None:
                trailers = [("grpc-status", str(refusal.code)), ("grpc-message", _percent(refusal.message))]
                self._conn.send_headers(stream.id, trailers, end_stream=True)
                self._flush()
                return
            answer = self._reflector.answer(request)
            await self._send(stream.id, _frame(answer.SerializeToString()), end=False)
        self._conn.send_headers(stream.id, [("grpc-status", "0")], end_stream=True)
        self._flush()

    async def _trailers_only(self, stream: Stream, status: status_pb2.Status) -> None:
        details = base64.b64encode(status.SerializeToString()).rstrip(b"=").decode()
        self._conn.send_headers(
            stream.id,
            [
                *GRPC_HEADERS,
                ("grpc-status", str(status.code)),
                ("grpc-message", _percent(status.message)),
                ("grpc-status-details-bin", details),
            ],
            end_stream=True,
        )
        self._flush()

    # -- plain HTTP over HTTP/2 ------------------------------------------------------------------

    async def _relay_http(self, stream: Stream) -> None:
        if stream.size > MAX_BODY:
            await self._answer_plain(
                stream, 413, b'{"code": 3, "message": "Invalid argument: body: too large"}'
            )
            return
        headers = {
            name: value
            for name, value in stream.headers.items()
            if not name.startswith(":") and name not in CONNECTION_SPECIFIC
        }
        method = stream.headers.get(":method", "GET")
        # the path as the client sent it: yarl would resolve its dot-segments, where HTTP/1.1 does not
        url = URL(self._base_url() + stream.headers.get(":path", "/"), encoded=True)
        skip = {"Accept", "Accept-Encoding", "User-Agent", "Content-Type"} - {n.title() for n in headers}
        async with self._relay().request(
            method, url, headers=headers, data=b"".join(stream.body) or None, skip_auto_headers=skip
        ) as response:
            answer = [(":status", str(response.status))]
            answer += [
                (name.lower(), value)
                for name, value in response.headers.items()
                if name.lower() not in CONNECTION_SPECIFIC
            ]
            if method == "HEAD":
                self._conn.send_headers(stream.id, answer, end_stream=True)
                self._flush()
                return
            self._conn.send_headers(stream.id, answer)
            self._flush()
            async for chunk in response.content.iter_chunked(CHUNK):
                await self._send(stream.id, chunk, end=False)
            await self._send(stream.id, b"", end=True)

    async def _answer_plain(self, stream: Stream, status: int, body: bytes) -> None:
        self._conn.send_headers(
            stream.id,
            [
                (":status", str(status)),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
            ],
        )
        await self._send(stream.id, body, end=True)

    # -- sending, within the peer's flow-control windows -----------------------------------------

    async def _send(self, stream_id: int, data: bytes, end: bool) -> None:
        while data:
            if self._closed:
                raise ConnectionError("the client went away")
            window = min(self._conn.local_flow_control_window(stream_id), self._conn.max_outbound_frame_size)
            if window <= 0:
                waiter = self._window.setdefault(stream_id, asyncio.get_running_loop().create_future())
                await waiter
                continue
            chunk, data = data[:window], data[window:]
            self._conn.send_data(stream_id, chunk, end_stream=end and not data)
            self._flush()
            if end and not data:
                return
        if end:
            self._conn.end_stream(stream_id)
            self._flush()

    def _wake(self, stream_id: int) -> None:
        waiter = self._window.pop(stream_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_all(self) -> None:
        for stream_id in list(self._window):
            self._wake(stream_id)

    def _flush(self) -> None:
        data = self._conn.data_to_send()
        if data and self._transport is not None and not self._closed:
            self._transport.write(data)


# Markers put in a stream's inbox in place of a message that cannot be used: never valid protobuf
# alone (a field with tag 0), so no real message is mistaken for one.
TOO_BIG = b"\x00too-big"
UNKNOWN_ENCODING = b"\x00unknown-encoding"
ENCODINGS = "identity,gzip,deflate"


_WBITS = {"gzip": 31, "deflate": 15}  # gRPC's "deflate" is the zlib format


def _decompress(encoding: str, message: bytes, room: int) -> bytes:
    """A message the client compressed (gRPC's per-message compression), or a marker.

    Inflated to at most ``room`` + 1 bytes (what the stream may still hold): 4 MiB of gzip can expand
    to 4 GiB, and the one byte over is enough to refuse the message as too big.
    """
    wbits = _WBITS.get(encoding)
    if wbits is None:
        return UNKNOWN_ENCODING
    inflater = zlib.decompressobj(wbits)
    try:
        inflated = inflater.decompress(message, room + 1)
    except zlib.error:
        return UNKNOWN_ENCODING
    if len(inflated) <= room and not inflater.eof:
        return UNKNOWN_ENCODING  # truncated
    return inflated


def _refusal(messages: list[bytes]) -> status_pb2.Status | None:
    if UNKNOWN_ENCODING in messages:
        why = f"Unimplemented: a message compressed other than with {ENCODINGS}, or corrupt"
        return status_pb2.Status(code=12, message=why)
    if TOO_BIG in messages or any(len(m) > MAX_MESSAGE for m in messages):
        return status_pb2.Status(code=8, message=f"Resource exhausted: a message over {MAX_MESSAGE} bytes")
    if len(messages) != 1:
        return status_pb2.Status(
            code=13, message=f"Internal error: a unary call takes one message, got {len(messages)}"
        )
    return None


def _frame(message: bytes) -> bytes:
    return struct.pack(">?I", False, len(message)) + message


def _percent(text: str) -> str:
    """grpc-message's encoding: percent-encode every byte outside printable ASCII, and '%'."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in text.encode("utf-8"))


_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def _grpc_timeout(headers: dict[str, str]) -> float | None:
    value = headers.get("grpc-timeout", "")
    if len(value) >= 2 and value[:-1].isdigit() and value[-1] in _UNITS:
        return int(value[:-1]) * _UNITS[value[-1]]
    return None


class Http2Service:
    """What the emulator's HTTP/2 connections share: the gRPC methods, reflection, the relay's client."""

    def __init__(self, base_url: Callable[[], str]) -> None:
        self._base_url = base_url
        self.methods = Methods(base_url)
        self._reflector = reflection.Reflection(list(self.methods.services))
        self._relay: aiohttp.ClientSession | None = None
        self._connections: set[H2Front] = set()

    def protocol(self) -> H2Front:
        return H2Front(self.methods, self._reflector, self._relay_session, self._base_url, self._connections)

    def _relay_session(self) -> aiohttp.ClientSession:
        if self._relay is None or self._relay.closed:
            # bodies pass as they are: a gzip answer stays gzip, with its Content-Encoding
            self._relay = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), auto_decompress=False
            )
        return self._relay

    async def close(self) -> None:
        for connection in list(self._connections):
            connection.close()
        await self.methods.close()
        if self._relay is not None:
            await self._relay.close()
