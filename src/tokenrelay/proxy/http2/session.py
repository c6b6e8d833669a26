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

Every frame type but DATA has its reader in readers.py (``READERS``, the base class, with the stream
states' judge and the header blocks); DATA's is inline in ``feed``: the hot path.
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

from . import frames as f
from .headercoding import BlockMemo, HeaderMemo
from .readers import READERS, FrameReaders, Headers, Peer, SessionError
from .states import StreamState

__all__ = ["Peer", "Session", "SessionError", "StreamGone"]


class StreamGone(Exception):
    """Nothing more can be sent on this stream: it is closed, or its sending side has ended."""


class Session(FrameReaders):
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
                READERS.get(kind, FrameReaders._unknown)(self, sid, flags, payload)
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

    def _end_local(self, sid: int, stream: StreamState) -> None:
        stream.local_closed = True
        if stream.remote_closed:
            del self.streams[sid]
