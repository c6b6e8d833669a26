"""One end of an HTTP/2 connection (RFC 9113) as a relay needs it: bytes in, calls out, bytes out.

The proxy first ran on the h2 library, which is made for every use of HTTP/2: an event object per
frame, an enum-keyed state machine per stream and per connection, hyperframe objects, generator
chains for header validation. About two thirds of the proxy's CPU per gRPC call went there, for ten
frames a call. A relay needs less: it never pushes, never sends PRIORITY, grants windows it chose
itself, and reads the frames it receives once. ``Session`` keeps what RFC 9113 asks of such an
endpoint, in either role (``client``: towards the upstream; else towards a client):

- frames: sizes (§4.2), stream 0 or not (§6), padding (§6.1, §6.2), header blocks in HEADERS and
  CONTINUATION frames with nothing in between (§6.10), bounded by ``max_block`` bytes and
  ``BLOCK_FRAMES`` frames, and stamped (``block_since``) for the caller to time out;
- streams: ids (§5.1.1), states (§5.1: idle, open, half-closed, closed; frames on a stream closed by
  RST_STREAM ignored) judged by one table (states.py), the peer held to ``max_streams`` (§5.1.2:
  REFUSED_STREAM before it acknowledged them), content-length against DATA; a malformed message
  (§8.1.1) is a stream error, reset and told to the peer (``on_malformed``), which may make it the
  connection's;
- flow control (§6.9): windows each way, the peer's kept to ours (FLOW_CONTROL_ERROR), ours reopened
  once the relay has passed the bytes on (``ack``), in WINDOW_UPDATEs of half a window or more;
- SETTINGS (§6.5), PING (§6.7), GOAWAY (§6.8, both ways; streams below its last id finish);
- HPACK (RFC 7541) through hpack's coder, with the memos of headercoding.py.

Each frame type has its reader (``READERS``), DATA's inline in ``feed``: the hot path.
A connection error raises ``SessionError`` out of ``feed`` (the caller sends GOAWAY with its code via
``close``); what the peer sends is told to the ``Peer`` as it is read. The frames to send pile up
in ``out`` until the caller ``take``s them, once per batch of events. ``controls`` counts the frames
that carry no request (the caller bounds them per second, CVE-2019-9512 and -9515): SETTINGS by
entry, PING, PRIORITY, WINDOW_UPDATE, GOAWAY, CONTINUATION, unknown types, empty DATA, and any frame
the state table ignores (DATA, HEADERS or RST_STREAM on a stream reset lately, RST_STREAM on one closed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from hpack.exceptions import HPACKError, OversizedHeaderListError

from . import frames as f
from .headercoding import BlockMemo, DecodedOversized, HeaderMemo
from .states import (
    CANCELLED,
    CLOSED,
    CONNECTION_ERROR,
    ENDED,
    IDLE,
    KIND_NAMES,
    OPEN,
    READ,
    RESET,
    STREAM_ERROR,
    TRANSITIONS,
    UNOPENED,
    StreamState,
)

Headers = list[tuple[bytes, bytes]]

RESETS_REMEMBERED = 1024  # streams reset lately, whose frames still in flight are ignored
# the frames of one header block, HEADERS and CONTINUATIONs: h2's bound too. A block of empty
# CONTINUATIONs is bounded by no byte count (20.9 million of them took 158 MiB and a core)
BLOCK_FRAMES = 64


class SessionError(Exception):
    """A connection error (RFC 9113 §5.4.1): the connection ends with GOAWAY and this code. The message
    never quotes a header value."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class StreamGone(Exception):
    """Nothing more can be sent on this stream: it is closed, or its sending side has ended."""


class Peer(Protocol):
    """What the relay does with what the other end sends; ``end``: the other end's side of the stream
    ended with it."""

    def on_head(self, sid: int, headers: Headers, end: bool) -> None: ...

    def on_trailers(self, sid: int, headers: Headers) -> None: ...

    def on_data(self, sid: int, data: bytes, flow: int, end: bool) -> None: ...

    def on_reset(self, sid: int, code: int) -> None: ...

    def on_window(self, sid: int) -> None:
        """Room to send opened on ``sid``, or on every stream (0)."""

    def on_goaway(self, last_sid: int, code: int) -> None: ...

    def on_malformed(self, sid: int, why: str) -> None:
        """The peer's message on ``sid`` is malformed (§8.1.1): the session resets the stream once this
        returns; raise SessionError to make it a connection error instead."""


class Session:
    """One end of an HTTP/2 connection."""

    def __init__(
        self,
        peer: Peer,
        *,
        client: bool,
        settings: dict[int, int],
        decoder: BlockMemo,
        max_block: int,
        connection_window: int = f.DEFAULT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.peer = peer
        self.client = client
        self.encoder = HeaderMemo()
        self.decoder = decoder
        self.max_block = max_block
        self.streams: dict[int, StreamState] = {}
        self.out = bytearray()
        self.closed = False  # GOAWAY sent for an error, or the connection is gone: nothing more is read
        self.controls = 0
        self.asks = 0  # PINGs and SETTINGS read, each answered with an ACK: the caller bounds them
        self._buffer = b""
        self._preface = not client  # a client's preface still to check
        self._settled = False  # the peer's first frame, a SETTINGS, came
        self._guarded = True  # the next frame's type is bound: not settled yet, or in a header block
        self._resets: dict[int, bool] = {}  # streams reset lately, oldest first: by the peer?
        # windows the peer opened in this read: told once the whole read is taken (the connection's
        # too), so that the relay sends what all of them allow, not a sliver after each frame
        self._opened: dict[int, None] = {}
        # header block in progress: its stream, END_STREAM, the fragments so far and their size
        self._block_sid = 0
        self._block_end = False
        self._block: list[bytes] = []
        self._block_size = 0
        self._clock = clock
        self.block_since: float | None = None  # when the header block in progress began
        # §5.1.1: the highest stream id the peer opened (server), the next one we open (client)
        self.highest_in = 0
        self._next_out = 1
        # ours, announced in the first SETTINGS; the peer may go by the defaults until it acknowledges
        # them, so streams opened before then start with the default window (§6.9.2)
        self.max_streams = settings.get(f.MAX_CONCURRENT_STREAMS, 2**31 - 1)
        self.local_window = settings.get(f.INITIAL_WINDOW_SIZE, f.DEFAULT_WINDOW)
        self._stream_window = f.DEFAULT_WINDOW  # a new stream's, until our SETTINGS are acknowledged
        self._acked = False  # the peer acknowledged our SETTINGS: max_streams binds it
        if f.MAX_HEADER_LIST_SIZE in settings:
            decoder.max_header_list_size = settings[f.MAX_HEADER_LIST_SIZE]
        # the peer's
        self.remote_max_streams = 2**31 - 1
        self.remote_window = f.DEFAULT_WINDOW
        self.max_frame = f.DEFAULT_FRAME_SIZE  # the largest frame we may send
        # the connection's windows
        self.send_window = f.DEFAULT_WINDOW
        self.recv_window = connection_window
        self.connection_window = connection_window
        self._unacked = 0
        if client:
            self.out += f.PREFACE
        self.out += f.settings(settings)
        if connection_window > f.DEFAULT_WINDOW:
            self.out += f.window_update(0, connection_window - f.DEFAULT_WINDOW)

    # -- what the relay calls ------------------------------------------------------------------------

    def take(self) -> bytes:
        """The bytes to write since the last call."""
        out = bytes(self.out)
        self.out.clear()
        return out

    @property
    def can_open(self) -> bool:
        """Stream ids are left for another stream of ours (§5.1.1: they never wrap)."""
        return self._next_out <= f.LARGEST_WINDOW

    def room(self, sid: int) -> int:
        """How many bytes of DATA may go on ``sid`` now, in one frame; raises StreamGone."""
        stream = self.streams.get(sid)
        if stream is None or stream.local_closed:
            raise StreamGone(sid)
        return min(self.send_window, stream.send_window, self.max_frame)

    def open(self, headers: Headers, end: bool) -> int:
        """A new stream from this (client) end, with its request's headers; its id."""
        sid = self._next_out
        self._next_out = sid + 2
        stream = self.streams[sid] = StreamState(self.remote_window, self._stream_window)
        stream.bodiless = (b":method", b"HEAD") in headers
        self.send_headers(sid, headers, end)
        return sid

    def send_headers(self, sid: int, headers: Headers, end: bool) -> None:
        stream = self.streams.get(sid)
        if stream is None or stream.local_closed:
            raise StreamGone(sid)
        block = self.encoder.encode(headers)
        flags = f.END_STREAM if end else 0
        size = self.max_frame
        out = self.out
        if len(block) <= size:
            out += f.HEADER.pack(len(block) << 8 | f.HEADERS, flags | f.END_HEADERS, sid)
            out += block
        else:
            for start in range(0, len(block), size):
                part = block[start : start + size]
                kind = f.CONTINUATION if start else f.HEADERS
                last = f.END_HEADERS if start + size >= len(block) else 0
                out += f.HEADER.pack(len(part) << 8 | kind, (0 if start else flags) | last, sid)
                out += part
        if end:
            self._end_local(sid, stream)

    def send_data(self, sid: int, data: bytes, end: bool) -> None:
        """DATA of at most ``room(sid)`` bytes."""
        stream = self.streams.get(sid)
        if stream is None or stream.local_closed:
            raise StreamGone(sid)
        size = len(data)
        stream.send_window -= size
        self.send_window -= size
        out = self.out
        out += f.HEADER.pack(size << 8 | f.DATA, f.END_STREAM if end else 0, sid)
        out += data
        if end:
            self._end_local(sid, stream)

    def end_stream(self, sid: int) -> None:
        self.send_data(sid, b"", True)

    def reset(self, sid: int, code: int, *, ended: bool = False) -> None:
        """RST_STREAM, unless the stream is closed already; ``ended``: even then (a stream error found in
        the frame that ended it, such as a malformed answer, RFC 9113 §8.1.1)."""
        if self.streams.pop(sid, None) is not None or ended:
            self.out += f.rst_stream(sid, code)
            self._remember_reset(sid)

    def ack(self, sid: int, size: int) -> None:
        """``size`` bytes the peer sent on ``sid`` were passed on: its windows may open again."""
        self._unacked += size
        if self._unacked >= self.connection_window >> 1:
            self.out += f.window_update(0, self._unacked)
            self.recv_window += self._unacked
            self._unacked = 0
        stream = self.streams.get(sid)
        if stream is not None and not stream.remote_closed:
            stream.unacked += size
            # half the window in force: the default one until the peer acknowledges our SETTINGS
            if stream.unacked >= self._stream_window >> 1:
                self.out += f.window_update(sid, stream.unacked)
                stream.recv_window += stream.unacked
                stream.granted += stream.unacked
                stream.unacked = 0

    def received(self, sid: int) -> int | None:
        """The bytes of DATA (padding included) the peer sent on ``sid`` so far; None once it ended
        its side. Worked out from the windows, so that the DATA path counts nothing more."""
        stream = self.streams.get(sid)
        if stream is None or stream.remote_closed:
            return None
        return stream.granted - stream.recv_window

    def goaway(self, code: int, debug: bytes = b"") -> None:
        """GOAWAY naming the last stream the peer opened: the streams up to it still finish."""
        self.out += f.goaway(self.highest_in, code, debug)

    def close(self, code: int, debug: bytes = b"") -> None:
        """GOAWAY for an error: nothing more is read or sent on any stream."""
        if not self.closed:
            self.goaway(code, debug)
            self.closed = True
        self._block = []  # a header block in progress is never read now

    def forget_above(self, last_sid: int) -> list[int]:
        """The peer's GOAWAY left these streams of ours unprocessed: they are closed."""
        gone = [sid for sid in self.streams if sid > last_sid]
        for sid in gone:
            del self.streams[sid]
            self._remember_reset(sid)
        return gone

    # -- reading ---------------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Read what the peer sent; raises SessionError for a connection error."""
        if self.closed:
            return
        data, pos = self._begin(data)
        if pos < 0:
            return
        size = len(data)
        unpack = f.HEADER.unpack_from
        streams = self.streams
        peer = self.peer
        while size - pos >= 9 and not self.closed:
            word, flags, sid = unpack(data, pos)
            length = word >> 8
            kind = word & 0xFF
            sid &= 0x7FFFFFFF
            if length > f.DEFAULT_FRAME_SIZE:  # we never announce more
                raise SessionError(f.FRAME_SIZE_ERROR, f"frame of {length} bytes, beyond the frame size")
            end = pos + 9 + length
            if end > size:
                break
            payload = data[pos + 9 : end]
            pos = end
            if self._guarded:
                self._check_order(kind, flags)
            if kind != f.DATA:
                READERS.get(kind, Session._unknown)(self, sid, flags, payload)
                continue
            # DATA, the hot path: inline, and the table asked only off it
            if not sid:
                raise SessionError(f.PROTOCOL_ERROR, "DATA on stream 0")
            flow = length
            if flags & f.PADDED:
                payload = self._unpad(payload)
            self.recv_window -= flow
            if self.recv_window < 0:
                raise SessionError(f.FLOW_CONTROL_ERROR, "DATA beyond the connection's window")
            stream = streams.get(sid)
            if stream is None or stream.remote_closed:
                self._stray_data(sid, flow)
                continue
            stream.recv_window -= flow
            if stream.recv_window < 0:
                raise SessionError(f.FLOW_CONTROL_ERROR, "DATA beyond the stream's window")
            ended = bool(flags & f.END_STREAM)
            if stream.expected is not None:
                stream.received += len(payload)
                if self._bad_length(stream, ended):
                    self._malformed(sid, "a body longer or shorter than its content-length")
                    self.ack(0, flow)  # the window it took is the connection's
                    continue
            if ended:
                self._end_remote(sid, stream)
            elif not payload:
                self.controls += 1
            peer.on_data(sid, payload, flow, ended)
        if pos < size:
            self._buffer = data[pos:]
        if self._opened:
            self._tell_opened()

    def _tell_opened(self) -> None:
        """The windows the peer opened in this read, told once the whole read is taken."""
        opened, self._opened = self._opened, {}
        if self.closed:
            return
        for sid in opened:
            if sid == 0 or sid in self.streams:
                self.peer.on_window(sid)

    def _begin(self, data: bytes) -> tuple[bytes, int]:
        """The bytes to read, those kept from the last read first, and where the first frame begins
        (-1: a client's preface is not whole yet, and kept)."""
        if self._buffer:
            data = self._buffer + data
            self._buffer = b""
        if not self._preface:
            return data, 0
        return data, self._read_preface(data) or -1

    def _read_preface(self, data: bytes) -> int:
        """Where the frames begin past a client's preface; 0: the preface is not whole yet (kept)."""
        if len(data) < len(f.PREFACE):
            if not f.PREFACE.startswith(data):
                raise SessionError(f.PROTOCOL_ERROR, "invalid HTTP/2 preface")
            self._buffer = data
            return 0
        if not data.startswith(f.PREFACE):
            raise SessionError(f.PROTOCOL_ERROR, "invalid HTTP/2 preface")
        self._preface = False
        return len(f.PREFACE)

    def _check_order(self, kind: int, flags: int) -> None:
        """The frames that must come first (SETTINGS) or next (CONTINUATION, in a header block)."""
        if not self._settled:
            if kind != f.SETTINGS or flags & f.ACK:
                raise SessionError(f.PROTOCOL_ERROR, "the first frame is not SETTINGS")
            self._settled = True
            self._guarded = False
        elif self._block_sid and kind != f.CONTINUATION:
            raise SessionError(f.PROTOCOL_ERROR, "a frame inside a header block")

    def _stray_data(self, sid: int, flow: int) -> None:
        """DATA on a stream not open for the peer to send on (the table never reads it)."""
        self._judge(f.DATA, sid)
        self.ack(0, flow)  # the window it took is the connection's

    # -- the stream states' judge ----------------------------------------------------------------------

    def _state(self, sid: int) -> int:
        """The state of stream ``sid`` (not 0) as a frame from the peer finds it (states.py)."""
        stream = self.streams.get(sid)
        if stream is not None:
            return ENDED if stream.remote_closed else OPEN
        by_peer = self._resets.get(sid)
        if by_peer is not None:
            return CANCELLED if by_peer else RESET
        if self._idle(sid):
            return IDLE if not self.client and sid & 1 else UNOPENED
        return CLOSED

    def _judge(self, kind: int, sid: int) -> bool:
        """Whether a frame of ``kind`` on stream ``sid`` is to be read (states.TRANSITIONS); an ignored
        one counts as a control frame, a stream error resets the stream, a connection error raises."""
        state = self._state(sid)
        verdict, code = TRANSITIONS[kind, state]
        if verdict == READ:
            return True
        if kind != f.WINDOW_UPDATE:  # counted already, as every WINDOW_UPDATE is
            self.controls += 1  # a frame that carries nothing read: a million of them is a flood
        if verdict == STREAM_ERROR:
            if sid in self.streams:
                self._reset_stream(sid, code)
            else:  # closed already, and the relay told
                self.out += f.rst_stream(sid, code)
        elif verdict == CONNECTION_ERROR:
            where = f"idle stream {sid}" if state <= UNOPENED else f"stream {sid}, after its end"
            raise SessionError(code, f"{KIND_NAMES[kind]} on {where}")
        return False

    # -- frames, one reader each (READERS); DATA is read in feed ---------------------------------------

    def _read_headers(self, sid: int, flags: int, payload: bytes) -> None:
        if not sid:
            raise SessionError(f.PROTOCOL_ERROR, "HEADERS on stream 0")
        if flags & (f.PADDED | f.PRIORITY_FLAG):
            if flags & f.PADDED:
                payload = self._unpad(payload)
            if flags & f.PRIORITY_FLAG:
                if len(payload) < 5:
                    raise SessionError(f.FRAME_SIZE_ERROR, "HEADERS too short for its priority")
                if f.u32(payload) & 0x7FFFFFFF == sid:
                    raise SessionError(f.PROTOCOL_ERROR, "a stream depending on itself")
                payload = payload[5:]
        if flags & f.END_HEADERS:
            self._headers(sid, payload, bool(flags & f.END_STREAM))
        else:
            self._block_sid = sid
            self._guarded = True
            self._block_end = bool(flags & f.END_STREAM)
            self._block = [payload]
            self._block_size = len(payload)
            self.block_since = self._clock()
            self._bound_block()

    def _read_continuation(self, sid: int, flags: int, payload: bytes) -> None:
        if not self._block_sid or sid != self._block_sid:
            raise SessionError(f.PROTOCOL_ERROR, "CONTINUATION outside a header block")
        self.controls += 1  # empty ones carry nothing, and a block of them may be reopened again and again
        self._block.append(payload)
        self._block_size += len(payload)
        self._bound_block()
        if flags & f.END_HEADERS:
            block = b"".join(self._block)
            self._block = []
            self.block_since = None
            self._block_sid = 0
            self._guarded = False
            self._headers(sid, block, self._block_end)

    def _read_priority(self, sid: int, flags: int, payload: bytes) -> None:
        self.controls += 1
        if not sid:
            raise SessionError(f.PROTOCOL_ERROR, "PRIORITY on stream 0")
        if len(payload) != 5:
            raise SessionError(f.FRAME_SIZE_ERROR, "PRIORITY not of 5 bytes")
        if f.u32(payload) & 0x7FFFFFFF == sid:
            raise SessionError(f.PROTOCOL_ERROR, "a stream depending on itself")

    def _read_rst_stream(self, sid: int, flags: int, payload: bytes) -> None:
        if not sid:
            raise SessionError(f.PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise SessionError(f.FRAME_SIZE_ERROR, "RST_STREAM not of 4 bytes")
        if self._judge(f.RST_STREAM, sid):
            del self.streams[sid]
            self._remember_reset(sid, by_peer=True)
            self.peer.on_reset(sid, f.u32(payload))

    def _read_settings(self, sid: int, flags: int, payload: bytes) -> None:
        self.controls += max(1, len(payload) // 6)  # by entry: one frame may carry 2,730 of them
        if sid:
            raise SessionError(f.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & f.ACK:
            if payload:
                raise SessionError(f.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            self._settings_acked()
            return
        self.asks += 1
        if len(payload) % 6:
            raise SessionError(f.FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6 bytes")
        self._settings(payload)

    def _read_push_promise(self, sid: int, flags: int, payload: bytes) -> None:
        raise SessionError(f.PROTOCOL_ERROR, "PUSH_PROMISE, with push disabled")

    def _read_ping(self, sid: int, flags: int, payload: bytes) -> None:
        self.controls += 1
        if sid:
            raise SessionError(f.PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise SessionError(f.FRAME_SIZE_ERROR, "PING not of 8 bytes")
        if not flags & f.ACK:
            self.asks += 1
            self.out += f.frame(f.PING, f.ACK, 0, payload)

    def _read_goaway(self, sid: int, flags: int, payload: bytes) -> None:
        self.controls += 1
        if sid:
            raise SessionError(f.PROTOCOL_ERROR, "GOAWAY on a stream")
        if len(payload) < 8:
            raise SessionError(f.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes")
        self.peer.on_goaway(f.u32(payload) & 0x7FFFFFFF, f.u32(payload, 4))

    def _read_window_update(self, sid: int, flags: int, payload: bytes) -> None:
        self.controls += 1
        if len(payload) != 4:
            raise SessionError(f.FRAME_SIZE_ERROR, "WINDOW_UPDATE not of 4 bytes")
        increment = f.u32(payload) & 0x7FFFFFFF
        if not sid:
            if not increment:
                raise SessionError(f.PROTOCOL_ERROR, "WINDOW_UPDATE of 0 on the connection")
            self.send_window += increment
            if self.send_window > f.LARGEST_WINDOW:
                raise SessionError(f.FLOW_CONTROL_ERROR, "the connection's window beyond 2^31-1")
            self._open_all()
            return
        if not self._judge(f.WINDOW_UPDATE, sid):
            return
        stream = self.streams[sid]
        if not increment:
            self._reset_stream(sid, f.PROTOCOL_ERROR)
            return
        stream.send_window += increment
        if stream.send_window > f.LARGEST_WINDOW:
            self._reset_stream(sid, f.FLOW_CONTROL_ERROR)
            return
        if 0 not in self._opened:
            self._opened[sid] = None

    def _unknown(self, sid: int, flags: int, payload: bytes) -> None:
        self.controls += 1  # §5.5: unknown frame types are ignored

    # -- what the frames carry -------------------------------------------------------------------------

    def _headers(self, sid: int, block: bytes, ended: bool) -> None:
        oversized = False
        try:
            headers: Headers = self.decoder.decode(block, raw=True)  # type: ignore[assignment]
        except DecodedOversized:  # decoded whole: the HPACK table is in step, the error is the stream's
            headers, oversized = [], True
        except OversizedHeaderListError as exc:
            raise SessionError(f.ENHANCE_YOUR_CALM, "header list larger than the limit") from exc
        except (HPACKError, IndexError, TypeError) as exc:
            raise SessionError(f.COMPRESSION_ERROR, "header block that does not decode") from exc
        # decoded whatever the stream's state: the HPACK table is the connection's (§4.3)
        stream = self.streams.get(sid)
        if (stream is None or stream.remote_closed) and not self._judge(f.HEADERS, sid):
            return
        if stream is None:  # idle: the peer opens it
            stream = self._open_in(sid)
            if stream is None:
                return
        if oversized:
            self._malformed(sid, f"a header list larger than {self.decoder.max_header_list_size} bytes")
        elif not stream.head:
            self._head(sid, stream, headers, ended)
        elif not ended:
            self._malformed(sid, "trailers without END_STREAM")
        elif stream.expected is not None and self._bad_length(stream, ended):
            self._malformed(sid, "a body longer or shorter than its content-length")
        else:
            self._end_remote(sid, stream)
            self.peer.on_trailers(sid, headers)

    def _open_in(self, sid: int) -> StreamState | None:
        """A stream the peer opens; None when refused: beyond our limit before the peer acknowledged
        it (gRPC clients burst on a fresh connection) it is REFUSED_STREAM, retried elsewhere (§5.1.2)."""
        if len(self.streams) >= self.max_streams:
            if self._acked:
                raise SessionError(f.PROTOCOL_ERROR, f"more than {self.max_streams} streams at once")
            self.highest_in = sid
            self.controls += 1  # a refusal costs a frame: a flood of them is one
            self.reset(sid, f.REFUSED_STREAM, ended=True)
            return None
        self.highest_in = sid
        stream = self.streams[sid] = StreamState(self.remote_window, self._stream_window)
        return stream

    def _head(self, sid: int, stream: StreamState, headers: Headers, ended: bool) -> None:
        if self.client and _informational(headers):
            if ended:
                self._malformed(sid, "an informational answer ending its stream")
            return
        stream.head = True
        if not stream.bodiless and (b":status", b"304") not in headers:
            why = self._content_length(stream, headers)
            if why is None and ended and stream.expected is not None and self._bad_length(stream, ended):
                why = "a body longer or shorter than its content-length"
            if why is not None:
                self._malformed(sid, why)
                return
        if ended:
            self._end_remote(sid, stream)
        self.peer.on_head(sid, headers, ended)

    def _settings_acked(self) -> None:
        self._acked = True
        delta = self.local_window - self._stream_window
        if delta:  # our one SETTINGS is in force now: every stream's window moves by the difference
            self._stream_window = self.local_window
            for stream in self.streams.values():
                stream.recv_window += delta
                stream.granted += delta

    def _settings(self, payload: bytes) -> None:
        opened = False
        for key, value in f.parse_settings(payload):
            if key == f.HEADER_TABLE_SIZE:
                self.encoder.header_table_size = value
            elif key == f.ENABLE_PUSH:
                if value > 1 or (value and self.client):
                    raise SessionError(f.PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH of {value}")
            elif key == f.MAX_CONCURRENT_STREAMS:
                self.remote_max_streams = value
            elif key == f.INITIAL_WINDOW_SIZE:
                if value > f.LARGEST_WINDOW:
                    raise SessionError(f.FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE beyond 2^31-1")
                delta = value - self.remote_window
                self.remote_window = value
                for stream in self.streams.values():  # §6.9.2: every stream's window moves by as much
                    stream.send_window += delta
                    if stream.send_window > f.LARGEST_WINDOW:
                        raise SessionError(f.FLOW_CONTROL_ERROR, "a stream's window beyond 2^31-1")
                opened = opened or delta > 0
            elif key == f.MAX_FRAME_SIZE:
                if not f.DEFAULT_FRAME_SIZE <= value <= f.LARGEST_FRAME_SIZE:
                    raise SessionError(f.PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE of {value}")
                self.max_frame = value
            # MAX_HEADER_LIST_SIZE is advisory; unknown settings are ignored (§6.5.2)
        self.out += f.frame(f.SETTINGS, f.ACK, 0)
        if opened:
            self._open_all()

    # -- helpers ---------------------------------------------------------------------------------------

    def _open_all(self) -> None:
        """The connection's window opened (or every stream's): told last, so that the streams named
        in the same read take their share of it first."""
        self._opened.pop(0, None)
        self._opened[0] = None

    def _unpad(self, payload: bytes) -> bytes:
        if not payload or payload[0] >= len(payload):
            raise SessionError(f.PROTOCOL_ERROR, "padding as long as the frame")
        return payload[1 : len(payload) - payload[0]]

    def _bound_block(self) -> None:
        if len(self._block) > BLOCK_FRAMES:
            raise SessionError(f.ENHANCE_YOUR_CALM, f"header block in more than {BLOCK_FRAMES} frames")
        if self._block_size > self.max_block:
            raise SessionError(f.ENHANCE_YOUR_CALM, "header block larger than the header list limit")

    def _idle(self, sid: int) -> bool:
        """§5.1: a stream neither side has opened yet."""
        if sid & 1:  # opened by the client
            return sid >= self._next_out if self.client else sid > self.highest_in
        return True  # the server's streams: never, without push

    def _reset_stream(self, sid: int, code: int) -> None:
        """A stream error (§5.4.2): RST_STREAM to the peer, and the relay told as if the peer had sent it."""
        self.reset(sid, code)
        self.peer.on_reset(sid, code)

    def _remember_reset(self, sid: int, *, by_peer: bool = False) -> None:
        """Frames the peer sent before it learnt of our reset are ignored, not refused (§5.1); after
        its own, they are a stream error."""
        resets = self._resets
        resets[sid] = by_peer
        if len(resets) > RESETS_REMEMBERED:
            del resets[next(iter(resets))]

    def _end_local(self, sid: int, stream: StreamState) -> None:
        stream.local_closed = True
        if stream.remote_closed:
            del self.streams[sid]

    def _end_remote(self, sid: int, stream: StreamState) -> None:
        stream.remote_closed = True
        if stream.local_closed:
            del self.streams[sid]

    def _content_length(self, stream: StreamState, headers: Headers) -> str | None:
        """Takes the message's content-length; what makes it malformed, if anything."""
        for name, value in headers:
            if name == b"content-length":
                if not value.isdigit():
                    return "a content-length that is not a number"
                if stream.expected is not None and stream.expected != int(value):
                    return "two content-lengths that disagree"
                stream.expected = int(value)
        return None

    def _bad_length(self, stream: StreamState, ended: bool) -> bool:
        expected = stream.expected
        assert expected is not None
        return stream.received > expected or (ended and stream.received != expected)

    def _malformed(self, sid: int, why: str) -> None:
        """§8.1.1: a malformed message is a stream error, RST_STREAM PROTOCOL_ERROR, the relay told why
        (a server's relay may end the connection instead); the other streams go on."""
        self.peer.on_malformed(sid, why)  # first: it may raise, and the connection ends without the RST
        self.reset(sid, f.PROTOCOL_ERROR, ended=True)


def _informational(headers: Headers) -> bool:
    for name, value in headers:
        if name == b":status":
            return value[:1] == b"1"
    return False


# one reader per frame type, DATA's inline in Session.feed; unknown types go to Session._unknown
READERS: dict[int, Callable[[Session, int, int, bytes], None]] = {
    f.HEADERS: Session._read_headers,
    f.PRIORITY: Session._read_priority,
    f.RST_STREAM: Session._read_rst_stream,
    f.SETTINGS: Session._read_settings,
    f.PUSH_PROMISE: Session._read_push_promise,
    f.PING: Session._read_ping,
    f.GOAWAY: Session._read_goaway,
    f.WINDOW_UPDATE: Session._read_window_update,
    f.CONTINUATION: Session._read_continuation,
}
