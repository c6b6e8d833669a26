"""HTTP/2 frame by frame, for the conformance suites (RFC 9113, RFC 7541): a peer that sends whatever
bytes a test writes, broken or not, and records every frame it receives, header blocks decoded in the
order they came (so an HPACK dynamic table is followed as the RFC says, by a decoder that is not the
proxy's). ``Wire.connect`` is a client of the proxy; ``ScriptedUpstream`` hands a test each
connection the proxy opens to it, to answer frame by frame.

No flow-control accounting of its own: a test that needs the windows checked uses h2 (h2client.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hpack import Decoder, Encoder
from hpack.exceptions import HPACKError
from hpack.hpack import encode_integer

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# RFC 9113 §6: frame types, flags, settings, error codes
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE = 0x0, 0x1, 0x2, 0x3, 0x4, 0x5
PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0x6, 0x7, 0x8, 0x9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 0x1, 0x2, 0x3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 0x4, 0x5, 0x6
MAX_WINDOW = 2**31 - 1

Headers = list[tuple[bytes, bytes]]


def frame(kind: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    """One frame as bytes, unchecked: any length, type, flag and stream id a test names."""
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + sid.to_bytes(4, "big") + payload


def settings(values: dict[int, int] | None = None, *, ack: bool = False, sid: int = 0) -> bytes:
    payload = b"".join(
        key.to_bytes(2, "big") + value.to_bytes(4, "big") for key, value in (values or {}).items()
    )
    return frame(SETTINGS, ACK if ack else 0, sid, payload)


def window_update(sid: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, sid, increment.to_bytes(4, "big"))


def rst_stream(sid: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, sid, code.to_bytes(4, "big"))


def goaway(last_sid: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, last_sid.to_bytes(4, "big") + code.to_bytes(4, "big") + debug)


def ping(payload: bytes = b"12345678", *, ack: bool = False) -> bytes:
    return frame(PING, ACK if ack else 0, 0, payload)


def data(sid: int, payload: bytes, *, end: bool = False, pad: int | None = None) -> bytes:
    """A DATA frame; ``pad`` adds the Pad Length octet and that many zero octets (RFC 9113 §6.1)."""
    flags = END_STREAM if end else 0
    if pad is not None:
        return frame(DATA, flags | PADDED, sid, bytes((pad,)) + payload + bytes(pad))
    return frame(DATA, flags, sid, payload)


def literal(value: bytes) -> bytes:
    """An HPACK string literal, not Huffman-coded (RFC 7541 §5.2), for blocks coded by hand."""
    return bytes(encode_integer(len(value), 7)) + value


def request_fields(
    path: bytes = b"/x", method: bytes = b"GET", extra: Iterable[tuple[bytes, bytes]] = ()
) -> Headers:
    return [(b":method", method), (b":scheme", b"http"), (b":authority", b"proxy"), (b":path", path), *extra]


@dataclass
class Frame:
    kind: int
    flags: int
    sid: int
    payload: bytes
    headers: Headers | None = None  # HEADERS, PUSH_PROMISE: the whole block, decoded, once it ended

    @property
    def code(self) -> int:
        """RST_STREAM's and GOAWAY's error code."""
        at = 4 if self.kind == GOAWAY else 0
        return int.from_bytes(self.payload[at : at + 4], "big")


@dataclass
class Reply:
    """What came on one stream: its header blocks (informational ones included), body and end."""

    blocks: list[Headers] = field(default_factory=list)
    body: bytes = b""
    ended: bool = False
    reset: int | None = None  # the RST_STREAM code

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.blocks[0]) if self.blocks else {}

    @property
    def status(self) -> bytes:
        return self.headers.get(b":status", b"")


class Wire:
    """One HTTP/2 connection, written to frame by frame; every frame received is kept in ``frames``.

    By default it acknowledges the peer's SETTINGS and gives back the window of every DATA frame at
    once (stream and connection), as a polite peer does; ``reopen=False`` leaves the windows shut.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        reopen: bool = True,
        max_frame_size: int = 16384,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.reopen = reopen
        self.max_frame_size = max_frame_size  # this side's SETTINGS_MAX_FRAME_SIZE: the peer keeps to it
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.frames: list[Frame] = []
        self.error: Exception | None = None  # what the peer sent that broke a rule, or did not decode
        self.eof = asyncio.Event()
        self._changed = asyncio.Event()
        self._block: tuple[Frame, bytearray] | None = None  # a header block waiting for END_HEADERS
        self._taken: set[int] = set()  # streams handed out by next_request
        self._task = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(
        cls, port: int, values: dict[int, int] | None = None, *, handshake: bool = True, reopen: bool = True
    ) -> Wire:
        """A client of ``port``: the preface and a SETTINGS of ``values``; with ``handshake``, returns
        once both sides' SETTINGS are acknowledged (no frame of the test can cross them)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        wire = cls(reader, writer, reopen=reopen, max_frame_size=(values or {}).get(MAX_FRAME_SIZE, 16384))
        wire.send(PREFACE, settings(values))
        if handshake:
            await wire.wait(lambda f: f.kind == SETTINGS and not f.flags & ACK, "the server's SETTINGS")
            await wire.wait(lambda f: f.kind == SETTINGS and bool(f.flags & ACK), "the SETTINGS ACK")
        return wire

    # -- sending ---------------------------------------------------------------------------------------

    def send(self, *chunks: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(b"".join(chunks))

    def block(self, fields: Headers) -> bytes:
        """``fields`` coded by this connection's HPACK encoder (its dynamic table moves)."""
        return self.encoder.encode(fields)

    def headers(
        self,
        sid: int,
        fields: Headers | bytes,
        *,
        end: bool = True,
        end_headers: bool = True,
        pad: int | None = None,
        priority: bytes | None = None,
        flags: int = 0,
    ) -> bytes:
        """A HEADERS frame of ``fields`` (coded here) or of a raw block; ``priority``: the 5 octets of
        RFC 9113 §6.2 (dependency and weight), ``pad`` as in ``data``."""
        block = fields if isinstance(fields, bytes) else self.block(fields)
        flags |= (END_STREAM if end else 0) | (END_HEADERS if end_headers else 0)
        if priority is not None:
            flags |= PRIORITY_FLAG
            block = priority + block
        if pad is not None:
            flags |= PADDED
            block = bytes((pad,)) + block + bytes(pad)
        return frame(HEADERS, flags, sid, block)

    def request(
        self, sid: int, path: bytes = b"/x", *, body: bytes | None = None, extra: Headers | None = None
    ) -> int:
        """A polite request on ``sid``: HEADERS, and the body in DATA frames of at most 16 KiB."""
        method = b"GET" if body is None else b"POST"
        self.send(self.headers(sid, request_fields(path, method, extra or []), end=body is None))
        if body is not None:
            chunks = [body[i : i + 16384] for i in range(0, len(body), 16384)] or [b""]
            self.send(*(data(sid, chunk, end=i == len(chunks) - 1) for i, chunk in enumerate(chunks)))
        return sid

    # -- receiving -------------------------------------------------------------------------------------

    async def wait(self, match: Callable[[Frame], bool], what: str, timeout: float = 10) -> Frame:
        """The first frame received that ``match``es, waiting for it; AssertionError naming ``what`` if
        the connection ends (or ``timeout`` passes) without one."""
        async with asyncio.timeout(timeout):
            while True:
                for received in self.frames:
                    if match(received):
                        return received
                if self.eof.is_set():
                    raise AssertionError(f"the connection ended without {what}: {self.summary()}")
                self._changed.clear()
                await self._changed.wait()

    async def goaway(self) -> Frame:
        """The peer's GOAWAY, once the peer has closed the connection as well."""
        sent = await self.wait(lambda f: f.kind == GOAWAY, "a GOAWAY")
        await self.closed()
        return sent

    async def closed(self, timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            await self.eof.wait()

    async def answer(self, sid: int) -> Reply:
        """What came on ``sid`` once it ended (END_STREAM or RST_STREAM), or the connection did."""
        await self.wait(
            lambda f: (
                f.sid == sid
                and (f.kind == RST_STREAM or (f.kind in (DATA, HEADERS) and bool(f.flags & END_STREAM)))
            ),
            f"the end of stream {sid}",
        )
        return self.reply(sid)

    async def round_trip(self, payload: bytes = b"roundtrp") -> None:
        """A PING and its ACK: every frame the peer sent in answer to what was sent before has come."""
        self.send(ping(payload))
        await self.wait(
            lambda f: f.kind == PING and bool(f.flags & ACK) and f.payload == payload, "the PING ACK"
        )

    def reply(self, sid: int) -> Reply:
        reply = Reply()
        for received in self.frames:
            if received.sid != sid:
                continue
            if received.kind == HEADERS and received.headers is not None:
                reply.blocks.append(received.headers)
            elif received.kind == DATA:
                reply.body += _unpadded(received)
            elif received.kind == RST_STREAM:
                reply.reset = received.code
            if received.kind in (DATA, HEADERS) and received.flags & END_STREAM:
                reply.ended = True
        return reply

    async def next_request(self) -> tuple[int, Headers]:
        """As a server: the next stream the peer opened (its id and request headers)."""
        opened = await self.wait(
            lambda f: f.kind == HEADERS and f.headers is not None and f.sid not in self._taken, "a request"
        )
        self._taken.add(opened.sid)
        assert opened.headers is not None
        return opened.sid, opened.headers

    async def request_body(self, sid: int) -> bytes:
        """As a server: the request body on ``sid``, once it ended."""
        await self.wait(
            lambda f: f.sid == sid and f.kind in (DATA, HEADERS) and bool(f.flags & END_STREAM),
            f"the end of request {sid}",
        )
        return self.reply(sid).body

    def of_kind(self, kind: int, sid: int | None = None) -> list[Frame]:
        return [f for f in self.frames if f.kind == kind and (sid is None or f.sid == sid)]

    def summary(self) -> str:
        """The frames received, for a failure message: type, flags and stream id."""
        return ", ".join(f"{f.kind}/{f.flags:#x}/{f.sid}" for f in self.frames[-20:]) or "no frame"

    async def close(self) -> None:
        self._task.cancel()
        self.writer.close()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await self._task

    async def _read(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                if length > self.max_frame_size:
                    self.error = ValueError(f"a frame of {length} octets, beyond SETTINGS_MAX_FRAME_SIZE")
                    return
                received = Frame(
                    head[3],
                    head[4],
                    int.from_bytes(head[5:9], "big") & MAX_WINDOW,
                    await self.reader.readexactly(length),
                )
                self._receive(received)
                self.frames.append(received)
                self._changed.set()
        except (asyncio.IncompleteReadError, OSError):
            pass  # the peer closed the connection
        except HPACKError as exc:
            self.error = exc
        finally:
            self.eof.set()
            self._changed.set()

    def _receive(self, received: Frame) -> None:
        kind = received.kind
        if kind == SETTINGS and not received.flags & ACK and not received.sid:
            self.send(settings(ack=True))
        elif kind == DATA and self.reopen and received.payload:
            self.send(
                window_update(0, len(received.payload)), window_update(received.sid, len(received.payload))
            )
        elif kind in (HEADERS, PUSH_PROMISE):
            self._block = (received, bytearray(_fragment(received)))
        elif kind == CONTINUATION and self._block is not None:
            self._block[1].extend(received.payload)
        if kind in (HEADERS, PUSH_PROMISE, CONTINUATION) and received.flags & END_HEADERS and self._block:
            opened, block = self._block
            self._block = None
            opened.headers = [
                (bytes(name), bytes(value)) for name, value in self.decoder.decode(bytes(block), raw=True)
            ]


def _unpadded(received: Frame) -> bytes:
    payload = received.payload
    if received.flags & PADDED:
        return payload[1 : len(payload) - payload[0]]
    return payload


def _fragment(received: Frame) -> bytes:
    """A HEADERS or PUSH_PROMISE frame's field block fragment: without padding, priority or promised id."""
    payload = _unpadded(received)
    if received.kind == HEADERS and received.flags & PRIORITY_FLAG:
        return payload[5:]
    if received.kind == PUSH_PROMISE:
        return payload[4:]
    return payload


class ScriptedUpstream:
    """A loopback HTTP/2 server answered by the test, frame by frame: ``connection()`` hands over each
    connection the proxy opens, once its preface came and this side's SETTINGS (``values``) went;
    ``reopen`` as for ``Wire``."""

    def __init__(self, values: dict[int, int] | None = None, *, reopen: bool = True) -> None:
        self.values = values
        self.reopen = reopen
        self.accepted: asyncio.Queue[Wire] = asyncio.Queue()
        self.wires: list[Wire] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def connection(self, timeout: float = 10) -> Wire:
        async with asyncio.timeout(timeout):
            return await self.accepted.get()

    async def stop(self) -> None:
        for wire in self.wires:
            await wire.close()
        if self._server is not None:
            self._server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            preface = await reader.readexactly(len(PREFACE))
        except asyncio.IncompleteReadError:
            return  # the proxy gave up on the connection before its preface
        assert preface == PREFACE, preface
        limit = (self.values or {}).get(MAX_FRAME_SIZE, 16384)
        wire = Wire(reader, writer, reopen=self.reopen, max_frame_size=limit)
        wire.send(settings(self.values))
        self.wires.append(wire)
        self.accepted.put_nowait(wire)
