"""session.Session against the h2 library as the other end, in memory: whatever requests, bodies,
windows, frame sizes and cuts of the byte stream, every answer arrives whole and h2 (which checks
flow control, stream states and framing itself) finds nothing to refuse."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    DataReceived,
    RequestReceived,
    StreamEnded,
    WindowUpdated,
)
from h2.settings import SettingCodes, Settings
from hpack.hpack import Encoder
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenrelay.proxy.context import ProxyContext
from tokenrelay.proxy.http2 import frames as f
from tokenrelay.proxy.http2.downstream import H2Client
from tokenrelay.proxy.http2.headercoding import BlockMemo, UpstreamDecoder
from tokenrelay.proxy.http2.relay import H2Relay
from tokenrelay.proxy.http2.session import Session, SessionError, StreamGone
from tokenrelay.proxy.http2.upstream import H2Upstream

from ..support.h2client import RawH2
from ..support.h2server import H2Proxied

Headers = list[tuple[bytes, bytes]]


@dataclass
class Received:
    head: Headers | None = None
    body: bytearray = field(default_factory=bytearray)
    trailers: Headers | None = None
    ended: bool = False
    reset: int | None = None


class Recorder:
    """A Peer that keeps what it is told, answers requests (server role) by echoing their bodies, and
    gives back the window of every byte at once."""

    def __init__(self) -> None:
        self.session: Session
        self.got: dict[int, Received] = {}
        self.echo: dict[int, deque[bytes]] = {}  # server role: body bytes still to send back
        self.ending: set[int] = set()
        self.goaway: tuple[int, int] | None = None

    def on_head(self, sid: int, headers: Headers, end: bool) -> None:
        self.got[sid] = Received(head=headers, ended=end)
        if not self.session.client:
            self.session.send_headers(sid, [(b":status", b"200")], False)
            self.echo[sid] = deque()
            if end:
                self.ending.add(sid)
                self.pump(sid)

    def on_trailers(self, sid: int, headers: Headers) -> None:
        self.got[sid].trailers = headers
        self.got[sid].ended = True
        if not self.session.client:
            self.ending.add(sid)
            self.pump(sid)

    def on_data(self, sid: int, data: bytes, flow: int, end: bool) -> None:
        got = self.got[sid]
        got.body += data
        got.ended = end
        self.session.ack(sid, flow)
        if not self.session.client:
            self.echo[sid].append(data)
            if end:
                self.ending.add(sid)
            self.pump(sid)

    def on_reset(self, sid: int, code: int) -> None:
        self.got.setdefault(sid, Received()).reset = code
        self.echo.pop(sid, None)

    def on_window(self, sid: int) -> None:
        for each in [sid] if sid else list(self.echo):
            self.pump(each)

    def on_goaway(self, last_sid: int, code: int) -> None:
        self.goaway = (last_sid, code)

    def on_malformed(self, sid: int, why: str) -> None:
        if not self.session.client:  # as the proxy's client side: a connection error
            raise SessionError(f.PROTOCOL_ERROR, why)
        self.on_reset(sid, f.PROTOCOL_ERROR)

    def pump(self, sid: int) -> None:
        """Echo what is queued within the windows; trailers once the request has ended."""
        queue = self.echo.get(sid)
        if queue is None:
            return
        session = self.session
        while queue:
            room = session.room(sid)
            if room <= 0:
                return
            data = queue.popleft()
            if len(data) > room:
                queue.appendleft(data[room:])
                data = data[:room]
            session.send_data(sid, data, False)
        if sid in self.ending:
            session.send_headers(sid, [(b"grpc-status", b"0")], True)
            del self.echo[sid]


def server(peer: Recorder) -> Session:
    session = Session(
        peer,
        client=False,
        settings={f.MAX_CONCURRENT_STREAMS: 100, f.INITIAL_WINDOW_SIZE: 65535},
        decoder=BlockMemo(),
        max_block=32 * 1024,
        connection_window=1 << 20,
    )
    peer.session = session
    return session


def client(peer: Recorder, window: int = 65535) -> Session:
    session = Session(
        peer,
        client=True,
        settings={f.ENABLE_PUSH: 0, f.INITIAL_WINDOW_SIZE: window},
        decoder=UpstreamDecoder(),
        max_block=32 * 1024,
        connection_window=4 * window,
    )
    peer.session = session
    return session


def chunks(data: bytes, cut: int) -> list[bytes]:
    """``data`` in pieces of ``cut`` bytes (0: whole), as reads from a socket may cut it."""
    return [data[i : i + cut] for i in range(0, len(data), cut)] if cut else [data]


REQUESTS = st.lists(
    st.tuples(
        st.sampled_from([0, 1, 100, 16384, 16385, 70000]),  # body; 70000: past the default windows
        st.booleans(),  # trailers
        st.integers(0, 3),  # DATA frames the body is sent in
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(
    requests=REQUESTS,
    window=st.sampled_from([1000, 16384, 65535, 1 << 20]),
    frame_size=st.sampled_from([16384, 100000]),
    padding=st.sampled_from([None, 0, 9]),
    cut=st.sampled_from([0, 1, 7, 1000]),
)
def test_a_server_session_answers_h2_clients_within_their_windows(
    requests: list[tuple[int, bool, int]], window: int, frame_size: int, padding: int | None, cut: int
) -> None:
    """An h2 client with any window and frame size, padded DATA or not, bytes cut anywhere: every body
    comes back whole; h2 raises on any frame beyond a window or on a closed stream, and raised none."""
    peer = Recorder()
    session = server(peer)
    h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    h2.local_settings = Settings(
        client=True,
        initial_values={SettingCodes.INITIAL_WINDOW_SIZE: window, SettingCodes.MAX_FRAME_SIZE: frame_size},
    )
    h2.initiate_connection()
    bodies: dict[int, bytes] = {}
    pending: dict[int, bytes] = {}
    trailers: dict[int, bool] = {}
    frames: dict[int, int] = {}
    for n, (size, with_trailers, parts) in enumerate(requests):
        sid = h2.get_next_available_stream_id()
        body = bytes([n]) * size
        bodies[sid], pending[sid], trailers[sid], frames[sid] = body, body, with_trailers, parts
        head = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/%d" % n)]
        h2.send_headers(sid, head, end_stream=not body and not with_trailers)
        if not body and not with_trailers:
            del pending[sid]
        elif not body:
            h2.send_headers(sid, [(b"x-trailer", b"t")], end_stream=True)
            del pending[sid]
    answers: dict[int, bytearray] = {sid: bytearray() for sid in bodies}
    ended: set[int] = set()
    for _ in range(2000):
        # the client sends what its windows let it
        for sid in list(pending):
            body = pending[sid]
            room = min(h2.local_flow_control_window(sid), h2.max_outbound_frame_size) - (padding or 0) - 1
            if room <= 0:
                continue
            piece = body[: max(1, min(room, len(bodies[sid]) // (frames[sid] or 1) + 1))]
            last = len(piece) == len(body)
            h2.send_data(sid, piece, end_stream=last and not trailers[sid], pad_length=padding)
            pending[sid] = body[len(piece) :]
            if last:
                del pending[sid]
                if trailers[sid]:
                    h2.send_headers(sid, [(b"x-trailer", b"t")], end_stream=True)
        out = h2.data_to_send()
        for piece in chunks(out, cut):
            session.feed(piece)
        back = session.take()
        if not out and not back and not pending:
            break
        for event in h2.receive_data(back):
            if isinstance(event, DataReceived):
                answers[event.stream_id] += event.data
                h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                ended.add(event.stream_id)
            assert not isinstance(event, RequestReceived)
    assert ended == set(bodies)
    assert {sid: bytes(body) for sid, body in answers.items()} == bodies
    assert session.streams == {}


ANSWERS = st.lists(
    st.tuples(
        st.sampled_from([0, 1, 5, 16385, 70000]),  # answer body
        st.booleans(),  # trailers
        st.booleans(),  # an informational 100 first
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(
    answers=ANSWERS,
    window=st.sampled_from([1000, 65535]),
    table=st.sampled_from([None, 0, 100]),
    cut=st.sampled_from([0, 1, 1000]),
)
def test_a_client_session_reads_h2_servers_answers_whole(
    answers: list[tuple[int, bool, bool]], window: int, table: int | None, cut: int
) -> None:
    """An h2 server that grants any window and shrinks the HPACK table: every request arrives whole at
    it, and every answer (after any 100 Continue) arrives whole at the session's Peer."""
    peer = Recorder()
    session = client(peer)
    h2 = H2Connection(H2Configuration(client_side=False, header_encoding=None))
    values = {SettingCodes.INITIAL_WINDOW_SIZE: window}
    if table is not None:
        values[SettingCodes.HEADER_TABLE_SIZE] = table
    h2.local_settings = Settings(client=False, initial_values=values)
    h2.initiate_connection()
    h2.receive_data(session.take())
    session.feed(h2.data_to_send())
    h2.receive_data(session.take())
    wanted: dict[int, tuple[int, bool, bool]] = {}
    to_send: dict[int, bytes] = {}
    for n, answer in enumerate(answers):
        head = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"up"), (b":path", b"/%d" % n)]
        sid = session.open([*head, (b"x-n", b"%d" % n)], False)
        wanted[sid] = answer
        to_send[sid] = bytes([n]) * 3000
    received: dict[int, bytearray] = {}
    replies: dict[int, bytes] = {}
    for _ in range(2000):
        for sid in list(to_send):  # the session sends its bodies within the server's windows
            body = to_send[sid]
            room = session.room(sid)
            if room > 0:
                session.send_data(sid, body[:room], room >= len(body))
                to_send[sid] = body[room:]
                if room >= len(body):
                    del to_send[sid]
        out = session.take()
        for event in h2.receive_data(out):
            if isinstance(event, RequestReceived):
                received[event.stream_id] = bytearray()
            elif isinstance(event, DataReceived):
                received[event.stream_id] += event.data
                h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                size, with_trailers, informational = wanted[event.stream_id]
                if informational:
                    h2.send_headers(event.stream_id, [(b":status", b"100")])
                h2.send_headers(
                    event.stream_id,
                    [(b":status", b"200"), (b"content-type", b"application/grpc")],
                    end_stream=not size and not with_trailers,
                )
                if size or with_trailers:
                    replies[event.stream_id] = bytes([event.stream_id]) * size
        for sid in list(replies):  # the server answers within the session's windows
            body = replies[sid]
            room = min(h2.local_flow_control_window(sid), h2.max_outbound_frame_size)
            if room <= 0 and body:
                continue
            piece = body[:room]
            last = len(piece) == len(body)
            h2.send_data(sid, piece, end_stream=last and not wanted[sid][1])
            replies[sid] = body[len(piece) :]
            if last:
                del replies[sid]
                if wanted[sid][1]:
                    h2.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
        back = h2.data_to_send()
        for piece in chunks(back, cut):
            session.feed(piece)
        if not out and not back and not to_send and not replies:
            break
    for n, sid in enumerate(wanted):
        size, with_trailers, _ = wanted[sid]
        assert bytes(received[sid]) == bytes([n]) * 3000
        got = peer.got[sid]
        assert got.head is not None and (b":status", b"200") in got.head
        assert bytes(got.body) == bytes([sid]) * size
        assert got.ended
        assert (got.trailers is not None) == with_trailers
    assert session.streams == {}


def served() -> tuple[Session, Recorder, H2Connection]:
    """A server session that has read an h2 client's preface and SETTINGS."""
    peer = Recorder()
    session = server(peer)
    h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    h2.initiate_connection()
    session.feed(h2.data_to_send())
    h2.receive_data(session.take())
    return session, peer, h2


def test_window_updates_go_out_once_half_a_window_was_passed_on() -> None:
    """The proxy reopens a client's windows in WINDOW_UPDATEs of half the window or more, not one per
    DATA frame: fewer frames each way."""
    session, _peer, h2 = served()
    head = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
    h2.send_headers(1, head)
    updates: list[tuple[int, int]] = []
    for _ in range(40):
        h2.send_data(1, b"x" * 1000)
        session.feed(h2.data_to_send())
        updates += [
            (event.stream_id, event.delta)
            for event in h2.receive_data(session.take())
            if isinstance(event, WindowUpdated)
        ]
    assert updates == [(1, 33000)]  # the stream's window is 65535: one update, past half of it


def test_frames_on_a_stream_it_reset_are_ignored_but_not_on_one_that_ended() -> None:
    """DATA still in flight on a stream the proxy reset is dropped (its window given back); DATA on a
    stream the client had ended is a connection error, STREAM_CLOSED (RFC 9113 §5.1)."""
    session, peer, h2 = served()
    head = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
    h2.send_headers(1, head)
    session.feed(h2.data_to_send())
    session.reset(1, f.CANCEL)
    h2.send_data(1, b"late")  # sent before the client read the reset
    session.feed(h2.data_to_send())
    assert peer.got[1].body == bytearray()
    h2.receive_data(session.take())
    h2.send_headers(3, head, end_stream=True)
    session.feed(h2.data_to_send())
    late = f.frame(f.DATA, 0, 3, b"x")  # h2 itself would refuse to send it
    with pytest.raises(SessionError) as caught:
        session.feed(late)
    assert caught.value.code == f.STREAM_CLOSED


def test_a_peer_settings_window_change_moves_every_open_stream() -> None:
    """SETTINGS_INITIAL_WINDOW_SIZE changes the window of streams already open by the difference
    (RFC 9113 §6.9.2), down as well as up, and the relay is told when sending may resume."""
    session, _peer, h2 = served()
    head = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
    h2.send_headers(1, head)  # the request goes on: the answer's side stays open too
    session.feed(h2.data_to_send())
    assert session.room(1) == 16384
    h2.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 10})
    session.feed(h2.data_to_send())
    assert session.room(1) == 10
    h2.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 100000})
    session.feed(h2.data_to_send())
    assert session.room(1) == 16384


def test_nothing_is_sent_on_a_stream_after_its_end() -> None:
    """Once the proxy ended a stream, sending on it raises StreamGone instead of writing a frame."""
    session, _peer, h2 = served()
    head = [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
    h2.send_headers(1, head)
    session.feed(h2.data_to_send())
    session.send_headers(1, [(b":status", b"200")], True)
    session.take()
    for send in (lambda: session.send_data(1, b"x", False), lambda: session.room(1)):
        with pytest.raises(StreamGone):
            send()
    assert session.take() == b""


def test_a_client_that_never_acknowledges_the_settings_still_uploads_past_the_default_window() -> None:
    """Until a client acknowledges the proxy's SETTINGS it goes by the default window (65,535); the
    proxy reopens that window by halves of it, not of the larger one it announced, so a body of any
    size still goes through (a client slow to acknowledge, or one that never does)."""
    peer = Recorder()
    session = Session(
        peer,
        client=False,
        settings={f.INITIAL_WINDOW_SIZE: 256 * 1024},
        decoder=BlockMemo(),
        max_block=32 * 1024,
        connection_window=1 << 20,
    )
    peer.session = session
    h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    h2.initiate_connection()
    ack = f.frame(f.SETTINGS, f.ACK, 0)
    head = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
    h2.send_headers(1, head)
    body = bytes(range(256)) * 800  # 204,800 bytes
    sent = 0
    for _ in range(100):
        room = min(h2.local_flow_control_window(1), h2.max_outbound_frame_size, len(body) - sent)
        if room > 0:
            h2.send_data(1, body[sent : sent + room], end_stream=sent + room == len(body))
            sent += room
        session.feed(h2.data_to_send().replace(ack, b""))  # the acknowledgement never reaches it
        h2.receive_data(session.take())
        if sent == len(body):
            break
    assert bytes(peer.got[1].body) == body


class Listener:
    """A Peer that only listens: what the session makes of any bytes, and nothing the relay adds."""

    def __init__(self) -> None:
        self.calls = 0

    def on_head(self, sid: int, headers: Headers, end: bool) -> None:
        self.calls += 1

    def on_trailers(self, sid: int, headers: Headers) -> None:
        self.calls += 1

    def on_data(self, sid: int, data: bytes, flow: int, end: bool) -> None:
        self.calls += 1

    def on_reset(self, sid: int, code: int) -> None:
        self.calls += 1

    def on_window(self, sid: int) -> None:
        self.calls += 1

    def on_goaway(self, last_sid: int, code: int) -> None:
        self.calls += 1

    def on_malformed(self, sid: int, why: str) -> None:
        self.calls += 1


FRAME = st.tuples(
    st.integers(0, 12),  # type: every defined one, and unknown ones
    st.integers(0, 255),  # flags
    st.sampled_from([0, 1, 1, 3, 2, 2**31 - 1]),  # stream id: the open one most
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from([b"", bytes(4), bytes(5), bytes(6), bytes(8), b"\x00\x00\x00\x01\x00\x00\xff\xff"]),
    ),
)
FRAMES = st.lists(FRAME, max_size=8)


@settings(max_examples=1000, deadline=None)
@given(frames=FRAMES, client=st.booleans(), cut=st.sampled_from([0, 1, 5]))
def test_any_frames_are_read_or_refused_with_a_connection_error(
    frames: list[tuple[int, int, int, bytes]], client: bool, cut: int
) -> None:
    """Whatever frames a hostile peer sends, of any type, flags, stream and payload, after a proper
    start: the session reads them or raises SessionError with an RFC 9113 code, nothing else (no
    IndexError, struct.error, KeyError...), and what it writes back is whole frames."""
    peer = Listener()
    session = Session(
        peer,
        client=client,
        settings={f.MAX_CONCURRENT_STREAMS: 100, f.INITIAL_WINDOW_SIZE: 65535},
        decoder=UpstreamDecoder() if client else BlockMemo(),
        max_block=32 * 1024,
    )
    head = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
    if client:  # stream 1 open, ours, and answered: the frames that follow find it in every state
        session.open(head, False)
        opening = f.frame(f.HEADERS, f.END_HEADERS, 1, Encoder().encode([(b":status", b"200")]))
    else:  # stream 1 opened by the peer
        opening = f.frame(f.HEADERS, f.END_HEADERS, 1, Encoder().encode(head))
    data = (b"" if client else f.PREFACE) + f.settings({}) + opening
    data += b"".join(
        f.HEADER.pack(len(payload) << 8 | kind, flags, sid) + payload for kind, flags, sid, payload in frames
    )
    refused: SessionError | None = None
    try:
        for piece in chunks(data, cut):
            session.feed(piece)
    except SessionError as exc:
        refused = exc
    if refused is not None:
        assert refused.code in {
            f.PROTOCOL_ERROR,
            f.FLOW_CONTROL_ERROR,
            f.STREAM_CLOSED,
            f.FRAME_SIZE_ERROR,
            f.COMPRESSION_ERROR,
            f.ENHANCE_YOUR_CALM,
        }
        assert str(refused)
    assert peer.calls  # the opening stream, at least, was read
    out = session.take().removeprefix(f.PREFACE)  # a client's, first
    while out:  # whole frames, each as long as its header says
        length = f.HEADER.unpack_from(out)[0] >> 8
        assert len(out) >= 9 + length
        out = out[9 + length :]


HEAD = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
BLOCK = Encoder().encode(HEAD)
NEXT = b"\x83\x86\x41\x01a\x04\x05/next"  # POST, http, literal authority "a", literal path, no indexing


@pytest.mark.parametrize(
    ("payload", "data"),
    [
        pytest.param(b"\x00abc", b"abc", id="zero padding"),
        pytest.param(b"\x02abc", b"a", id="padding one short of the payload"),
        pytest.param(b"\x03abc", b"", id="padding as long as the rest of the payload"),
        pytest.param(b"\x04abc", None, id="padding one more than the rest of the payload"),
        pytest.param(b"\x05abc", None, id="padding longer than the payload"),
        pytest.param(b"\x00", b"", id="zero padding, no data"),
        pytest.param(b"", None, id="PADDED flag on an empty payload"),
    ],
)
def test_padded_data_is_read_to_the_byte(payload: bytes, data: bytes | None) -> None:
    """RFC 9113 §6.1: a padded DATA frame gives the relay exactly the bytes between its pad length
    and its padding, the whole frame counted against the window; padding that leaves no room for
    its own length byte (or a PADDED frame with no payload at all) is a PROTOCOL_ERROR."""
    session, peer, h2 = served()
    h2.send_headers(1, HEAD)
    session.feed(h2.data_to_send())
    window = session.recv_window
    padded = f.frame(f.DATA, f.PADDED | f.END_STREAM, 1, payload)
    if data is None:
        with pytest.raises(SessionError) as caught:
            session.feed(padded)
        assert caught.value.code == f.PROTOCOL_ERROR
        return
    session.feed(padded)
    assert bytes(peer.got[1].body) == data
    assert peer.got[1].ended
    assert session.recv_window == window - len(payload)


@pytest.mark.parametrize(
    ("payload", "head"),
    [
        pytest.param(b"\x00" + BLOCK, HEAD, id="zero padding"),
        pytest.param(b"\x03" + BLOCK + bytes(3), HEAD, id="padding of 3"),
        pytest.param(b"\x03" + bytes(3), [], id="padding as long as the rest of the payload"),
        pytest.param(b"\x04" + bytes(3), None, id="padding one more than the rest of the payload"),
    ],
)
def test_padded_headers_are_read_to_the_byte(payload: bytes, head: Headers | None) -> None:
    """RFC 9113 §6.2: a padded HEADERS gives the decoder the block alone (nothing of the padding, so
    the next block decodes too), up to the frame's end and not one byte past it (PROTOCOL_ERROR)."""
    session, peer, _h2 = served()
    flags = f.PADDED | f.END_HEADERS | f.END_STREAM
    if head is None:
        with pytest.raises(SessionError) as caught:
            session.feed(f.frame(f.HEADERS, flags, 1, payload))
        assert caught.value.code == f.PROTOCOL_ERROR
        return
    session.feed(
        f.frame(f.HEADERS, flags, 1, payload) + f.frame(f.HEADERS, flags, 3, b"\x01" + NEXT + b"\x00")
    )
    assert peer.got[1].head == head
    assert peer.got[3].head == [*HEAD[:3], (b":path", b"/next")]


def test_a_padded_headers_with_no_payload_is_refused() -> None:
    """RFC 9113 §6.2: a HEADERS with the PADDED flag and no payload (not even the pad length) is a
    PROTOCOL_ERROR, not an IndexError out of the session."""
    session, _peer, _h2 = served()
    with pytest.raises(SessionError) as caught:
        session.feed(f.frame(f.HEADERS, f.PADDED | f.END_HEADERS, 1))
    assert caught.value.code == f.PROTOCOL_ERROR


def test_frames_after_the_clients_end_or_reset_cost_only_that_stream() -> None:
    """RFC 9113 §5.1: DATA on a stream the client ended (half-closed remote), or HEADERS on one it
    reset, is a stream error (RST_STREAM STREAM_CLOSED), not the end of the connection: another
    stream on it is still read."""
    listener = Listener()
    session = Session(listener, client=False, settings={}, decoder=BlockMemo(), max_block=32 * 1024)
    h2 = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    h2.initiate_connection()
    h2.send_headers(1, HEAD, end_stream=True)
    h2.send_headers(3, HEAD)
    h2.send_headers(5, HEAD)
    h2.reset_stream(5)
    session.feed(h2.data_to_send())
    session.take()
    block = Encoder().encode([(b"x-late", b"1")])
    session.feed(f.frame(f.DATA, 0, 1, b"late") + f.frame(f.HEADERS, f.END_HEADERS, 5, block))
    out = session.take()
    assert f.rst_stream(1, f.STREAM_CLOSED) in out
    assert f.rst_stream(5, f.STREAM_CLOSED) in out
    h2.receive_data(out)
    calls = listener.calls
    h2.send_data(3, b"still", end_stream=True)
    session.feed(h2.data_to_send())
    assert listener.calls == calls + 1  # the DATA, read
    assert 3 in session.streams


class Sink(asyncio.Transport):
    """A transport that keeps what is written to it, for a protocol driven by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def whole_frames(out: bytes) -> None:
    """``out`` is whole frames, each as long as its header says; a GOAWAY among them has a known code."""
    while out:
        word, _flags, _sid = f.HEADER.unpack_from(out)
        length = word >> 8
        assert len(out) >= 9 + length
        if word & 0xFF == f.GOAWAY:
            assert f.u32(out, 13) in KNOWN_CODES
        out = out[9 + length :]


REQUEST = [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/fuzz")]
KNOWN_CODES = {
    f.NO_ERROR,
    f.PROTOCOL_ERROR,
    f.FLOW_CONTROL_ERROR,
    f.STREAM_CLOSED,
    f.FRAME_SIZE_ERROR,
    f.COMPRESSION_ERROR,
    f.ENHANCE_YOUR_CALM,
}
# header blocks of fields a peer may get wrong: pseudo-headers, numbers that are none, hop-by-hop names
FIELDS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                b":status",
                b":method",
                b":path",
                b"content-length",
                b"grpc-status",
                b"te",
                b"connection",
                b"x-a",
            ]
        ),
        st.one_of(
            st.sampled_from([b"200", b"2x0", b"100", b"204", b"304", b"999", b"20", b"-1", b"0", b""]),
            st.binary(max_size=6),
        ),
    ),
    max_size=5,
)
STATUS = st.sampled_from([b"200", b"2x0", b"100", b"204", b"304", b"999", b"20", b""])
# a head as a peer would send it (an answer's :status, a request's pseudo-header fields) then the rest
LEADS = st.one_of(
    STATUS.map(lambda status: [(b":status", status)]), st.just([*REQUEST[:3], (b":path", b"/f")])
)
HEADS = st.tuples(
    st.just(f.HEADERS),
    st.one_of(st.sampled_from([f.END_HEADERS, f.END_HEADERS | f.END_STREAM]), st.integers(0, 255)),
    st.sampled_from([1, 1, 3]),
    st.builds(lambda lead, rest: [*lead, *rest], LEADS, FIELDS),
)
Drawn = tuple[int, int, int, bytes | Headers]
PEER_FRAMES: st.SearchStrategy[list[Drawn]] = st.lists(st.one_of(FRAME, HEADS), max_size=8)


def encoded(frames: list[Drawn], encoder: Encoder) -> bytes:
    """The frames drawn, as bytes: header fields coded by ``encoder``, flags kept whatever they are."""
    out = b""
    for kind, flags, sid, fields in frames:
        payload = fields if isinstance(fields, bytes) else encoder.encode(fields)
        out += f.HEADER.pack(len(payload) << 8 | kind, flags, sid) + payload
    return out


async def warmed(h2proxied: H2Proxied) -> tuple[ProxyContext, H2Relay]:
    """The proxy's context and HTTP/2 relay, once a request went through: a token held, the relay made."""
    client = await RawH2.open(h2proxied.proxy.port)
    answer = await client.answer(client.request(b"/warm"))
    await client.close()
    assert answer.headers[b":status"] == b"200"
    context = h2proxied.proxy.context
    return context, context.upstreams.side(H2Relay)


def front_end(context: ProxyContext, relay: H2Relay) -> tuple[H2Client, Sink]:
    conn = H2Client(context, relay)
    transport = Sink()
    conn.connection_made(transport)
    context.connections.add(conn)
    return conn, transport


async def test_any_frames_from_a_client_are_read_or_refused_by_the_front_end(h2proxied: H2Proxied) -> None:
    """Whatever frames a client sends after a proper start and a request (any type, flags, stream,
    payload, header fields): the front end (downstream.H2Client) reads them, or refuses them with
    GOAWAY and an RFC 9113 code; no other exception leaves data_received."""
    context, relay = await warmed(h2proxied)

    @settings(max_examples=300, deadline=None)
    @given(frames=PEER_FRAMES, cut=st.sampled_from([0, 1, 5]))
    def client_sends(frames: list[Drawn], cut: int) -> None:
        conn, transport = front_end(context, relay)
        encoder = Encoder()
        data = f.PREFACE + f.settings({}) + f.frame(f.HEADERS, f.END_HEADERS, 1, encoder.encode(REQUEST))
        try:
            for piece in chunks(data + encoded(frames, encoder), cut):
                conn.data_received(piece)
        finally:
            conn.connection_lost(None)
        whole_frames(bytes(transport.written))

    client_sends()


async def test_any_frames_from_the_upstream_are_read_or_refused(h2proxied: H2Proxied) -> None:
    """Whatever frames the upstream sends on a connection carrying a client's request (any type,
    flags, stream, payload, header fields such as a :status of 2x0): the upstream side
    (upstream.H2Upstream) reads them, or resets the stream, or ends the connection with GOAWAY and an
    RFC 9113 code; no other exception leaves data_received."""
    context, relay = await warmed(h2proxied)
    pool = relay.pool

    @settings(max_examples=300, deadline=None)
    @given(frames=PEER_FRAMES, cut=st.sampled_from([0, 1, 5]))
    def upstream_sends(frames: list[Drawn], cut: int) -> None:
        up = H2Upstream(pool)
        upstream = Sink()
        up.connection_made(upstream)
        pool._conns.append(up)  # the one the client's stream goes on
        conn, _client = front_end(context, relay)
        try:
            conn.data_received(
                f.PREFACE
                + f.settings({})
                + f.frame(f.HEADERS, f.END_HEADERS | f.END_STREAM, 1, Encoder().encode(REQUEST))
            )
            assert up.streams  # precondition: the request went to this connection
            encoder = Encoder()
            data = f.settings({}) + encoded(frames, encoder)
            for piece in chunks(data, cut):
                up.data_received(piece)
        finally:
            up.connection_lost(None)
            conn.connection_lost(None)
        whole_frames(bytes(upstream.written).removeprefix(f.PREFACE))

    upstream_sends()
