"""h2spec's checks, written in Python: the proxy's HTTP/2 server side as a client sees it through its
socket (RFC 9113, RFC 7541). One table per section, each row named for the rule it pins.

A connection error is a GOAWAY with the code the RFC names, then the close. Where the RFC lets a
server answer a stream error with a connection error (RFC 9113 §5.4: it may treat any stream error
so), or gives a choice of codes, the row accepts each allowed outcome. Every case ends by checking
that a new, polite client is still served, and that a malformed request (path ``/bad``) never
reached the upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from h2.errors import ErrorCodes
from h2.events import DataReceived, Event, PingAckReceived, SettingsAcknowledged
from h2.exceptions import StreamClosedError
from h2.settings import SettingCodes, Settings

from tokenrelay.proxy import ProxyServer
from tokenrelay.tokens.sts import Issued

from ..support.h2client import Answer, RawH2
from ..support.h2server import H2Echo, H2Proxied, download_body
from ..support.h2wire import (
    ACK,
    CONTINUATION,
    DATA,
    ENABLE_PUSH,
    END_HEADERS,
    GOAWAY,
    HEADER_TABLE_SIZE,
    HEADERS,
    INITIAL_WINDOW_SIZE,
    MAX_CONCURRENT_STREAMS,
    MAX_FRAME_SIZE,
    MAX_WINDOW,
    PADDED,
    PING,
    PRIORITY,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    Headers,
    Wire,
    data,
    frame,
    goaway,
    literal,
    ping,
    request_fields,
    rst_stream,
    settings,
    window_update,
)
from ..support.proxy import Observed, StartProxy, Tokens
from ..support.waiting import eventually

E = ErrorCodes
Send = Callable[[Wire], Awaitable[None]]
UNKNOWN = 0x20  # a frame type no RFC defines


# -- outcomes ------------------------------------------------------------------------------------------


async def still_serves(port: int) -> None:
    """A new, polite client is served."""
    wire = await Wire.connect(port)
    reply = await wire.answer(wire.request(1, b"/after"))
    await wire.close()
    assert reply.status == b"200", reply


@dataclass(frozen=True)
class GoawayWith:
    """RFC 9113 §5.4.1: GOAWAY with one of ``codes``, then the connection closed."""

    codes: tuple[int, ...]

    async def check(self, wire: Wire) -> None:
        sent = await wire.goaway()
        assert sent.code in self.codes, (E(sent.code), wire.summary())


@dataclass(frozen=True)
class StreamError:
    """RFC 9113 §5.4.2: RST_STREAM on ``sid`` with one of ``codes``, the connection still serving; or
    that error taken for a connection error (GOAWAY with one of ``codes``)."""

    sid: int
    codes: tuple[int, ...]

    async def check(self, wire: Wire) -> None:
        sent = await wire.wait(
            lambda f: f.kind == GOAWAY or (f.kind == RST_STREAM and f.sid == self.sid), "an error"
        )
        assert sent.code in self.codes, (E(sent.code), wire.summary())
        if sent.kind == GOAWAY:
            await wire.closed()
        else:
            reply = await wire.answer(wire.request(99, b"/same-connection"))
            assert reply.status == b"200", wire.summary()


@dataclass(frozen=True)
class Ignored:
    """The frames are ignored (or taken as the RFC allows): no GOAWAY, the streams in ``served``
    answered, and a new stream on the same connection too."""

    served: tuple[int, ...] = ()

    async def check(self, wire: Wire) -> None:
        for sid in self.served:
            assert (await wire.answer(sid)).status == b"200", wire.summary()
        reply = await wire.answer(wire.request(99, b"/same-connection"))
        assert reply.status == b"200", wire.summary()
        await wire.round_trip()
        assert not wire.of_kind(GOAWAY), wire.summary()


Outcome = GoawayWith | StreamError | Ignored


def goaway_with(*codes: int) -> GoawayWith:
    return GoawayWith(codes)


def reset(sid: int, *codes: int) -> StreamError:
    return StreamError(sid, codes)


IGNORED = Ignored()


async def run_case(
    h2proxied: H2Proxied, send: Send, outcome: Outcome, release: asyncio.Event | None = None
) -> None:
    """``send``, then check ``outcome``; ``release`` is set once the proxy has taken what was sent."""
    wire = await Wire.connect(h2proxied.proxy.port)
    try:
        await send(wire)
        if release is not None:
            wire.send(ping(b"barrier!"))
            await wire.wait(
                lambda f: f.kind == GOAWAY or f.payload == b"barrier!", "the PING ACK or a GOAWAY"
            )
            release.set()
        await outcome.check(wire)
        assert wire.error is None, wire.error
    finally:
        await wire.close()
    await still_serves(h2proxied.proxy.port)
    assert all(seen["path"] != "/base/bad" for seen in h2proxied.echo.seen)


def raw(build: Callable[[Wire], bytes]) -> Send:
    """A case that writes its frames at once."""

    async def send(wire: Wire) -> None:
        wire.send(build(wire))

    return send


def case(build: Callable[[Wire], bytes], outcome: Outcome, rule: str, *marks: pytest.MarkDecorator) -> object:
    return pytest.param(raw(build), outcome, id=rule, marks=marks)


# -- frames the rows are built of ----------------------------------------------------------------------


def waiting(wire: Wire, sid: int = 1) -> bytes:
    """A whole request the upstream holds (``/slow``): its stream stays half-closed (remote)."""
    return wire.headers(sid, request_fields(b"/slow"))


def open_request(wire: Wire, sid: int = 1, path: bytes = b"/bad") -> bytes:
    """A POST whose body has not ended: its stream stays open."""
    return wire.headers(sid, request_fields(path, b"POST"), end=False)


def reserved_bit(wire: Wire) -> bytes:
    """A request on stream 1 whose stream id has the reserved bit set (RFC 9113 §4.1)."""
    sent = wire.headers(1, request_fields(b"/x"))
    return sent[:5] + bytes((sent[5] | 0x80,)) + sent[6:]


def priority(depends_on: int, weight: int = 15, exclusive: bool = False) -> bytes:
    """PRIORITY's payload, and the priority fields of HEADERS (RFC 9113 §6.3)."""
    return ((depends_on | (exclusive << 31)).to_bytes(4, "big")) + bytes((weight,))


BAD_GET = request_fields(b"/bad")
# A request header block coded by hand (RFC 7541 Appendix C): GET (index 2), http (6), a literal
# :path /bad and :authority proxy, without indexing; a row puts its broken field after it.
PLAIN = b"\x82\x86\x04\x04/bad\x01\x05proxy"
USER_AGENT = b"\x0f\x2b"  # a literal without indexing, its name the static table's user-agent (58)


# -- 3.4 and 6.5: the preface and SETTINGS -------------------------------------------------------------


async def test_the_server_preface_is_a_settings_frame_and_client_settings_are_acknowledged(
    h2proxied: H2Proxied,
) -> None:
    """RFC 9113 §3.4: the proxy's first frame is SETTINGS (no ACK, stream 0); §6.5.3: it acknowledges
    the client's SETTINGS, at the start and later on, each with an empty SETTINGS ACK."""
    wire = await Wire.connect(
        h2proxied.proxy.port, {INITIAL_WINDOW_SIZE: 100000, MAX_CONCURRENT_STREAMS: 50}, handshake=False
    )
    first = await wire.wait(lambda f: True, "a frame")
    assert (first.kind, first.flags, first.sid) == (SETTINGS, 0, 0)
    assert len(first.payload) % 6 == 0
    await wire.wait(lambda f: f.kind == SETTINGS and bool(f.flags & ACK), "the SETTINGS ACK")
    wire.send(settings({INITIAL_WINDOW_SIZE: 70000}))
    await wire.round_trip()
    acks = [f for f in wire.of_kind(SETTINGS) if f.flags & ACK]
    await wire.close()
    assert [(f.sid, f.payload) for f in acks] == [(0, b""), (0, b"")]


@pytest.mark.parametrize(
    ("send", "outcome"),
    [
        case(
            lambda w: frame(SETTINGS, ACK, 0, settings({INITIAL_WINDOW_SIZE: 1})[9:]),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.5 SETTINGS with ACK and a payload: FRAME_SIZE_ERROR",
        ),
        case(
            lambda w: frame(SETTINGS, 0, 0, b"\x00\x03\x00\x00\x00\x64\x00"),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.5 SETTINGS of a length not a multiple of 6: FRAME_SIZE_ERROR",
        ),
        case(
            lambda w: settings({INITIAL_WINDOW_SIZE: 1}, sid=1),
            goaway_with(E.PROTOCOL_ERROR),
            "6.5 SETTINGS on a stream: PROTOCOL_ERROR",
        ),
        case(
            lambda w: settings({ENABLE_PUSH: 2}),
            goaway_with(E.PROTOCOL_ERROR),
            "6.5.2 SETTINGS_ENABLE_PUSH of 2: PROTOCOL_ERROR",
        ),
        case(
            lambda w: settings({INITIAL_WINDOW_SIZE: MAX_WINDOW + 1}),
            goaway_with(E.FLOW_CONTROL_ERROR),
            "6.5.2 SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1: FLOW_CONTROL_ERROR",
        ),
        case(
            lambda w: settings({MAX_FRAME_SIZE: 16383}),
            goaway_with(E.PROTOCOL_ERROR),
            "6.5.2 SETTINGS_MAX_FRAME_SIZE below 2^14: PROTOCOL_ERROR",
        ),
        case(
            lambda w: settings({MAX_FRAME_SIZE: 2**24}),
            goaway_with(E.PROTOCOL_ERROR),
            "6.5.2 SETTINGS_MAX_FRAME_SIZE above 2^24-1: PROTOCOL_ERROR",
        ),
        case(lambda w: settings({0xFF: 7}), IGNORED, "6.5.2 an unknown setting is ignored"),
        case(lambda w: settings({ENABLE_PUSH: 1}), IGNORED, "6.5.2 a client may ask for push"),
        case(
            lambda w: settings({MAX_FRAME_SIZE: 2**24 - 1, INITIAL_WINDOW_SIZE: MAX_WINDOW}),
            IGNORED,
            "6.5.2 the largest SETTINGS_MAX_FRAME_SIZE and INITIAL_WINDOW_SIZE are accepted",
        ),
    ],
)
async def test_settings(h2proxied: H2Proxied, send: Send, outcome: Outcome) -> None:
    """RFC 9113 §6.5: a SETTINGS frame the RFC forbids ends the connection with the code it names;
    settings it allows are taken, unknown ones ignored."""
    await run_case(h2proxied, send, outcome)


# -- 4 and 6: frames ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("send", "outcome"),
    [
        case(
            lambda w: frame(UNKNOWN, 0xFF, 0, b"abc") + frame(UNKNOWN, 0, 1, b"x"),
            IGNORED,
            "4.1 frames of an unknown type are ignored",
        ),
        case(
            lambda w: w.headers(1, request_fields(b"/x"), flags=0x10 | 0x40 | 0x80),
            Ignored(served=(1,)),
            "4.1 unknown flags are ignored",
        ),
        case(
            reserved_bit,
            Ignored(served=(1,)),
            "4.1 the reserved bit of the stream id is ignored",
        ),
        case(
            lambda w: open_request(w) + data(1, b"x" * 16385),
            reset(1, E.FRAME_SIZE_ERROR),
            "4.2 DATA beyond SETTINGS_MAX_FRAME_SIZE: FRAME_SIZE_ERROR",
        ),
        case(
            lambda w: w.headers(1, PLAIN + USER_AGENT + literal(b"a" * 16400)),
            goaway_with(E.FRAME_SIZE_ERROR),
            "4.2 HEADERS beyond SETTINGS_MAX_FRAME_SIZE: connection FRAME_SIZE_ERROR",
        ),
        case(lambda w: data(0, b"x"), goaway_with(E.PROTOCOL_ERROR), "6.1 DATA on stream 0: PROTOCOL_ERROR"),
        case(
            lambda w: w.headers(0, request_fields(b"/bad")),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 HEADERS on stream 0: PROTOCOL_ERROR",
        ),
        case(
            lambda w: frame(PRIORITY, 0, 0, priority(1)),
            goaway_with(E.PROTOCOL_ERROR),
            "6.3 PRIORITY on stream 0: PROTOCOL_ERROR",
        ),
        case(
            lambda w: waiting(w) + frame(PRIORITY, 0, 1, priority(0)[:4]),
            reset(1, E.FRAME_SIZE_ERROR),
            "6.3 PRIORITY of length 4: stream FRAME_SIZE_ERROR",
        ),
        case(
            lambda w: frame(PRIORITY, 0, 3, priority(0)) + frame(PRIORITY, 0, 7, priority(3, 200)),
            IGNORED,
            "6.3 PRIORITY on idle streams is allowed",
        ),
        case(
            lambda w: waiting(w) + frame(PRIORITY, 0, 1, priority(1)),
            reset(1, E.PROTOCOL_ERROR),
            "5.3.1 PRIORITY making a stream depend on itself: stream PROTOCOL_ERROR",
        ),
        case(
            lambda w: w.headers(1, BAD_GET, priority=priority(1)),
            reset(1, E.PROTOCOL_ERROR),
            "5.3.1 HEADERS making its stream depend on itself: stream PROTOCOL_ERROR",
        ),
        case(
            lambda w: frame(RST_STREAM, 0, 0, bytes(4)),
            goaway_with(E.PROTOCOL_ERROR),
            "6.4 RST_STREAM on stream 0: PROTOCOL_ERROR",
        ),
        case(
            lambda w: frame(PING, 0, 1, b"12345678"),
            goaway_with(E.PROTOCOL_ERROR),
            "6.7 PING on a stream: PROTOCOL_ERROR",
        ),
        case(
            lambda w: ping(b"123456"),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.7 PING of length 6: FRAME_SIZE_ERROR",
        ),
        case(
            lambda w: frame(GOAWAY, 0, 1, goaway(0, 0)[9:]),
            goaway_with(E.PROTOCOL_ERROR),
            "6.8 GOAWAY on a stream: PROTOCOL_ERROR",
        ),
        case(
            lambda w: frame(WINDOW_UPDATE, 0, 0, b"\x00\x00\x01"),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.9 WINDOW_UPDATE of length 3: FRAME_SIZE_ERROR",
        ),
        case(
            lambda w: frame(CONTINUATION, END_HEADERS, 0, PLAIN),
            goaway_with(E.PROTOCOL_ERROR),
            "6.10 CONTINUATION on stream 0: PROTOCOL_ERROR",
        ),
        case(
            lambda w: waiting(w) + frame(PUSH_PROMISE, END_HEADERS, 1, (2).to_bytes(4, "big") + PLAIN),
            goaway_with(E.PROTOCOL_ERROR),
            "8.4 a PUSH_PROMISE from a client: PROTOCOL_ERROR",
        ),
    ],
)
async def test_frames(h2proxied: H2Proxied, send: Send, outcome: Outcome) -> None:
    """RFC 9113 §4 and §6: frames of unknown type or flags are ignored; a frame too large, on the
    wrong stream or of the wrong length is the error the RFC names."""
    await run_case(h2proxied, send, outcome)


async def test_ping_is_answered_with_its_payload_and_a_ping_ack_is_not(h2proxied: H2Proxied) -> None:
    """RFC 9113 §6.7: a PING is answered by a PING ACK with the same 8 octets; a PING ACK gets no
    answer (the next PING's answer comes, and none to the ACK before it)."""
    wire = await Wire.connect(h2proxied.proxy.port)
    wire.send(ping(b"ackonly!", ack=True))
    await wire.round_trip(b"\x00\xffpayld!")
    pings = wire.of_kind(PING)
    await wire.close()
    assert [(f.flags, f.sid, f.payload) for f in pings] == [(ACK, 0, b"\x00\xffpayld!")]


async def test_a_client_goaway_lets_its_streams_in_flight_finish(h2proxied: H2Proxied) -> None:
    """RFC 9113 §6.8: a client's GOAWAY (NO_ERROR) ends no stream it had opened: the answer comes in
    full, then the proxy closes the connection."""
    wire = await Wire.connect(h2proxied.proxy.port)
    wire.send(waiting(wire))
    await eventually(lambda: len(h2proxied.echo.seen) == 1, "the request upstream")
    wire.send(goaway(0, E.NO_ERROR))
    await wire.round_trip()
    h2proxied.echo.gate.set()
    reply = await wire.answer(1)
    await wire.closed()
    await wire.close()
    assert reply.status == b"200"
    assert json.loads(reply.body) == {"slow": "done"}
    assert reply.reset is None


async def test_a_stream_beyond_the_concurrency_limit_is_refused(h2proxied: H2Proxied) -> None:
    """RFC 9113 §5.1.2: a HEADERS opening a stream beyond the SETTINGS_MAX_CONCURRENT_STREAMS the proxy
    announced (100) is a stream error PROTOCOL_ERROR or REFUSED_STREAM (or taken for a connection
    error), and never reaches the upstream."""
    wire = await Wire.connect(h2proxied.proxy.port)
    wire.send(*(waiting(wire, sid) for sid in range(1, 200, 2)), wire.headers(201, BAD_GET))
    sent = await wire.wait(lambda f: f.kind == GOAWAY or (f.kind == RST_STREAM and f.sid == 201), "an error")
    await wire.close()
    allowed = (E.PROTOCOL_ERROR, E.REFUSED_STREAM) if sent.kind == RST_STREAM else (E.PROTOCOL_ERROR,)
    assert sent.code in allowed, wire.summary()
    await still_serves(h2proxied.proxy.port)
    assert all(seen["path"] != "/base/bad" for seen in h2proxied.echo.seen)


async def test_a_client_table_size_of_zero_is_honoured(h2proxied: H2Proxied) -> None:
    """RFC 7541 §4.2, §6.3: once the proxy has acknowledged a client's SETTINGS_HEADER_TABLE_SIZE of 0,
    its first header block begins with a dynamic table size update to 0, and no block refers to the
    dynamic table (a decoder whose table holds nothing decodes every answer)."""
    wire = await Wire.connect(h2proxied.proxy.port, {HEADER_TABLE_SIZE: 0})
    wire.decoder.max_allowed_table_size = 0
    wire.decoder.header_table_size = 0
    replies = [await wire.answer(wire.request(sid, b"/x")) for sid in (1, 3, 5)]
    await wire.close()
    assert wire.error is None
    assert [reply.status for reply in replies] == [b"200"] * 3
    assert wire.of_kind(HEADERS)[0].payload[:1] == b"\x20"


# -- 5.1: stream states ---------------------------------------------------------------------------------


async def answered_then(wire: Wire, then: bytes) -> None:
    """Stream 1 answered in full (closed on both sides), then ``then``."""
    reply = await wire.answer(wire.request(1, b"/x"))
    assert reply.status == b"200"
    wire.send(then)


async def reset_by_proxy_then_data(wire: Wire) -> None:
    """The proxy answers a TRACE at once and resets the rest of its request (RST_STREAM NO_ERROR,
    RFC 9113 §8.1); the DATA the client had in flight for it comes after."""
    wire.send(wire.headers(1, request_fields(b"/x", b"TRACE"), end=False))
    await wire.wait(lambda f: f.kind == RST_STREAM and f.sid == 1, "the RST_STREAM")
    assert wire.reply(1).status == b"405"
    wire.send(data(1, b"late", end=True))


@pytest.mark.parametrize(
    ("send", "outcome"),
    [
        case(lambda w: data(1, b"x"), goaway_with(E.PROTOCOL_ERROR), "5.1 idle: DATA is a PROTOCOL_ERROR"),
        case(
            lambda w: rst_stream(1, E.CANCEL),
            goaway_with(E.PROTOCOL_ERROR),
            "5.1 idle: RST_STREAM is a PROTOCOL_ERROR",
        ),
        case(
            lambda w: window_update(1, 100),
            goaway_with(E.PROTOCOL_ERROR),
            "5.1 idle: WINDOW_UPDATE is a PROTOCOL_ERROR",
        ),
        case(
            lambda w: frame(CONTINUATION, END_HEADERS, 1, PLAIN),
            goaway_with(E.PROTOCOL_ERROR),
            "5.1 idle: CONTINUATION is a PROTOCOL_ERROR",
        ),
        case(
            lambda w: w.headers(2, BAD_GET),
            goaway_with(E.PROTOCOL_ERROR),
            "5.1.1 an even stream id: PROTOCOL_ERROR",
        ),
        case(
            lambda w: w.headers(5, request_fields(b"/x")) + w.headers(3, BAD_GET),
            goaway_with(E.PROTOCOL_ERROR, E.STREAM_CLOSED),
            "5.1.1 a stream id below one used: PROTOCOL_ERROR",
        ),
        case(
            lambda w: waiting(w) + data(1, b"x"),
            reset(1, E.STREAM_CLOSED),
            "5.1 half-closed (remote): DATA is STREAM_CLOSED",
        ),
        case(
            lambda w: waiting(w) + w.headers(1, [(b"x-late", b"1")]),
            reset(1, E.STREAM_CLOSED),
            "5.1 half-closed (remote): HEADERS is STREAM_CLOSED",
        ),
        case(
            lambda w: waiting(w) + frame(RST_STREAM, 0, 1, bytes(3)),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.4 RST_STREAM of length 3: FRAME_SIZE_ERROR",
        ),
        case(
            lambda w: waiting(w) + rst_stream(1, E.CANCEL) + frame(PRIORITY, 0, 1, priority(0)),
            IGNORED,
            "5.1 closed: PRIORITY on a stream the client reset is harmless",
        ),
        pytest.param(
            lambda w: answered_then(w, window_update(1, 1000)),
            IGNORED,
            id="5.1 closed: a WINDOW_UPDATE after the stream ended is ignored",
        ),
        pytest.param(
            lambda w: answered_then(w, rst_stream(1, E.CANCEL)),
            IGNORED,
            id="5.1 closed: a RST_STREAM after the stream ended is ignored",
        ),
        pytest.param(
            lambda w: answered_then(w, data(1, b"x")),
            reset(1, E.STREAM_CLOSED),
            id="5.1 closed: DATA after the stream ended is STREAM_CLOSED",
        ),
        pytest.param(
            reset_by_proxy_then_data,
            IGNORED,
            id="5.1 closed: DATA in flight on a stream the proxy reset is ignored",
        ),
    ],
)
async def test_stream_states(h2proxied: H2Proxied, send: Send, outcome: Outcome) -> None:
    """RFC 9113 §5.1: what each stream state allows; frames a state forbids are the error it names,
    the frames it lets cross a reset or an end are ignored."""
    await run_case(h2proxied, send, outcome)


# -- 4.3, 6.2, 6.10 and 8: header blocks ---------------------------------------------------------------


def with_field(coded: bytes) -> Callable[[Wire], bytes]:
    """A request whose header block holds a field ``coded`` by hand, after its valid fields."""
    return lambda w: w.headers(1, PLAIN + coded)


def trailers(fields: Headers, *, end: bool = True) -> Callable[[Wire], bytes]:
    """A POST with a body, ended by a trailer block of ``fields``."""
    return lambda w: open_request(w) + data(1, b"body") + w.headers(1, fields, end=end)


def request_of(fields: Headers) -> Callable[[Wire], bytes]:
    """A request of ``fields`` on stream 1, coded by the connection's encoder."""
    return lambda w: w.headers(1, fields)


def no(name: bytes) -> Headers:
    return [item for item in BAD_GET if item[0] != name]


def with_body(length: bytes, body: bytes) -> Callable[[Wire], bytes]:
    """A POST whose content-length says ``length`` and whose DATA carries ``body``."""
    fields = request_fields(b"/bad", b"POST", [(b"content-length", length)])
    return lambda w: w.headers(1, fields, end=False) + data(1, body, end=True)


@pytest.mark.parametrize(
    ("send", "outcome"),
    [
        case(
            lambda w: w.headers(1, BAD_GET) + frame(CONTINUATION, END_HEADERS, 1, w.block([(b"x-a", b"1")])),
            goaway_with(E.PROTOCOL_ERROR),
            "6.10 CONTINUATION after END_HEADERS: PROTOCOL_ERROR",
        ),
        case(
            lambda w: (
                w.headers(1, BAD_GET, end_headers=False)
                + data(1, b"x")
                + frame(CONTINUATION, END_HEADERS, 1, b"")
            ),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 DATA inside a header block: PROTOCOL_ERROR",
        ),
        case(
            lambda w: w.headers(1, BAD_GET, end_headers=False) + w.headers(3, BAD_GET),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 HEADERS of another stream inside a header block: PROTOCOL_ERROR",
        ),
        case(
            lambda w: w.headers(1, BAD_GET, end_headers=False) + frame(CONTINUATION, END_HEADERS, 3, b""),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 CONTINUATION of another stream inside a header block: PROTOCOL_ERROR",
        ),
        case(
            lambda w: (
                w.headers(1, BAD_GET, end_headers=False)
                + frame(PRIORITY, 0, 1, priority(0))
                + frame(CONTINUATION, END_HEADERS, 1, b"")
            ),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 PRIORITY inside a header block: PROTOCOL_ERROR",
        ),
        case(
            lambda w: open_request(w) + data(1, b"x") + frame(CONTINUATION, END_HEADERS, 1, b""),
            goaway_with(E.PROTOCOL_ERROR),
            "6.10 CONTINUATION after DATA: PROTOCOL_ERROR",
        ),
        case(
            lambda w: (
                w.headers(1, BAD_GET, end_headers=False) + ping() + frame(CONTINUATION, END_HEADERS, 1, b"")
            ),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 PING inside a header block: PROTOCOL_ERROR",
        ),
        case(
            lambda w: (
                w.headers(1, BAD_GET, end_headers=False)
                + frame(UNKNOWN, 0, 1, b"x")
                + frame(CONTINUATION, END_HEADERS, 1, b"")
            ),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 a frame of unknown type inside a header block: PROTOCOL_ERROR",
        ),
        case(
            lambda w: frame(HEADERS, PADDED | END_HEADERS | 1, 1, b"\x10" + PLAIN[:4]),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 HEADERS padding as long as the payload: PROTOCOL_ERROR",
        ),
        case(
            lambda w: open_request(w) + frame(DATA, PADDED, 1, b"\x05abc"),
            goaway_with(E.PROTOCOL_ERROR),
            "6.1 DATA padding as long as the payload: PROTOCOL_ERROR",
        ),
        case(
            with_field(b"\x80"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 6.1 index 0: COMPRESSION_ERROR",
        ),
        case(
            with_field(b"\xc6"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 2.3.3 an index beyond the table: COMPRESSION_ERROR",
        ),
        case(
            lambda w: w.headers(1, b"\x3f\xe1\x3f" + PLAIN),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 6.3 a table size update above SETTINGS_HEADER_TABLE_SIZE: COMPRESSION_ERROR",
        ),
        case(
            with_field(b"\x20"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 4.2 a table size update after a field: COMPRESSION_ERROR",
        ),
        case(
            with_field(USER_AGENT + b"\x84\xff\xff\xff\xff"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 5.2 a Huffman string holding EOS: COMPRESSION_ERROR",
        ),
        case(
            with_field(USER_AGENT + b"\x82\x1f\xff"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 5.2 Huffman padding longer than 7 bits: COMPRESSION_ERROR",
        ),
        case(
            with_field(USER_AGENT + b"\x81\x18"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 5.2 Huffman padding not of ones: COMPRESSION_ERROR",
        ),
        case(
            with_field(USER_AGENT + b"\x05ab"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 5.2 a string longer than the block: COMPRESSION_ERROR",
        ),
        case(
            trailers([(b"x-trailer", b"1")], end=False),
            reset(1, E.PROTOCOL_ERROR),
            "8.1 trailers without END_STREAM: PROTOCOL_ERROR",
        ),
        case(
            trailers([(b":path", b"/x")]),
            reset(1, E.PROTOCOL_ERROR),
            "8.1 a pseudo-header in trailers: PROTOCOL_ERROR",
        ),
        case(
            request_of([*no(b":path"), (b"x-a", b"1"), (b":path", b"/bad")]),
            reset(1, E.PROTOCOL_ERROR),
            "8.3 a pseudo-header after a regular field: PROTOCOL_ERROR",
        ),
        case(request_of(no(b":path")), reset(1, E.PROTOCOL_ERROR), "8.3.1 no :path: PROTOCOL_ERROR"),
        case(request_of(no(b":method")), reset(1, E.PROTOCOL_ERROR), "8.3.1 no :method: PROTOCOL_ERROR"),
        case(request_of(no(b":scheme")), reset(1, E.PROTOCOL_ERROR), "8.3.1 no :scheme: PROTOCOL_ERROR"),
        case(
            request_of([*no(b":path"), (b":path", b"")]),
            reset(1, E.PROTOCOL_ERROR),
            "8.3.1 an empty :path: PROTOCOL_ERROR",
        ),
        case(
            request_of([*BAD_GET, (b":path", b"/bad")]),
            reset(1, E.PROTOCOL_ERROR),
            "8.3.1 :path twice: PROTOCOL_ERROR",
        ),
        case(
            request_of([*BAD_GET[:1], *BAD_GET]),
            reset(1, E.PROTOCOL_ERROR),
            "8.3.1 :method twice: PROTOCOL_ERROR",
        ),
        case(
            request_of([*BAD_GET[:2], *BAD_GET[1:]]),
            reset(1, E.PROTOCOL_ERROR),
            "8.3.1 :scheme twice: PROTOCOL_ERROR",
        ),
        case(
            request_of([(b":unknown", b"x"), *BAD_GET]),
            reset(1, E.PROTOCOL_ERROR),
            "8.3 an unknown pseudo-header: PROTOCOL_ERROR",
        ),
        case(
            request_of([*BAD_GET[:1], (b":status", b"200"), *BAD_GET[1:]]),
            reset(1, E.PROTOCOL_ERROR),
            "8.3 a response pseudo-header in a request: PROTOCOL_ERROR",
        ),
        case(
            request_of([*BAD_GET, (b"X-Upper", b"1")]),
            reset(1, E.PROTOCOL_ERROR),
            "8.2 an uppercase field name: PROTOCOL_ERROR",
        ),
        case(
            request_of([*BAD_GET, (b"x-nul", b"a\x00b")]),
            reset(1, E.PROTOCOL_ERROR),
            "8.2.1 a field value holding NUL: PROTOCOL_ERROR",
        ),
        *(
            case(
                request_of([*BAD_GET, (name, value)]),
                reset(1, E.PROTOCOL_ERROR),
                f"8.2.2 the connection-specific field {name.decode()}: PROTOCOL_ERROR",
            )
            for name, value in [
                (b"connection", b"keep-alive"),
                (b"keep-alive", b"timeout=5"),
                (b"proxy-connection", b"keep-alive"),
                (b"transfer-encoding", b"chunked"),
                (b"upgrade", b"h2c"),
            ]
        ),
        case(
            request_of([*BAD_GET, (b"te", b"gzip")]),
            reset(1, E.PROTOCOL_ERROR),
            "8.2.2 TE other than trailers: PROTOCOL_ERROR",
        ),
        case(
            with_body(b"10", b"12345"),
            reset(1, E.PROTOCOL_ERROR),
            "8.1.1 DATA shorter than content-length: PROTOCOL_ERROR",
        ),
        case(
            with_body(b"2", b"12345"),
            reset(1, E.PROTOCOL_ERROR),
            "8.1.1 DATA longer than content-length: PROTOCOL_ERROR",
        ),
    ],
)
async def test_header_blocks(h2proxied: H2Proxied, send: Send, outcome: Outcome) -> None:
    """RFC 9113 §4.3, §6.2, §6.10, §8 and RFC 7541: a header block interrupted, badly coded or
    malformed is the error the RFCs name, and the request never reaches the upstream."""
    await run_case(h2proxied, send, outcome)


FIELDS = request_fields(b"/ok", extra=[(b"x-check", bytes(range(0x21, 0x7F)) * 200), (b"x-other", b"kept")])


def continued(wire: Wire) -> bytes:
    """The request's block over a HEADERS and CONTINUATIONs of 4000 octets, END_STREAM on the HEADERS."""
    block = wire.block(FIELDS)
    parts = [block[i : i + 4000] for i in range(0, len(block), 4000)]
    last = len(parts) - 1
    frames = [wire.headers(1, parts[0], end_headers=False)]
    frames += [
        frame(CONTINUATION, END_HEADERS if i == last else 0, 1, part) for i, part in enumerate(parts) if i
    ]
    return b"".join(frames)


SMALL = request_fields(b"/ok", extra=[(b"x-check", b"v" * 40), (b"x-other", b"kept")])


@pytest.mark.parametrize(
    ("build", "fields"),
    [
        pytest.param(continued, FIELDS, id="6.10 a request over HEADERS and CONTINUATIONs"),
        pytest.param(lambda w: w.headers(1, SMALL, pad=200), SMALL, id="6.2 a padded HEADERS"),
        pytest.param(lambda w: w.headers(1, SMALL, pad=0), SMALL, id="6.2 a HEADERS with padding 0"),
        pytest.param(
            lambda w: w.headers(1, SMALL, priority=priority(0, 255, exclusive=True)),
            SMALL,
            id="6.2 a HEADERS with priority",
        ),
        pytest.param(
            lambda w: w.headers(1, SMALL, priority=priority(3, 7), pad=9),
            SMALL,
            id="6.2 a padded HEADERS with priority",
        ),
    ],
)
async def test_header_blocks_the_rfc_allows_are_served(
    h2proxied: H2Proxied, build: Callable[[Wire], bytes], fields: Headers
) -> None:
    """RFC 9113 §6.2, §6.10: a block split over CONTINUATIONs, padded, or with priority fields reaches
    the upstream whole."""
    wire = await Wire.connect(h2proxied.proxy.port)
    wire.send(build(wire))
    reply = await wire.answer(1)
    await wire.close()
    assert reply.status == b"200"
    seen = json.loads(reply.body)
    assert seen["path"] == "/base/ok"
    sent = [[name.decode(), value.decode()] for name, value in fields if name.startswith(b"x-")]
    assert [pair for pair in seen["headers"] if pair[0].startswith("x-")] == sent


async def test_padded_data_is_passed_on_without_its_padding(h2proxied: H2Proxied) -> None:
    """RFC 9113 §6.1: padded DATA frames (padding 0 and 255 too) reach the upstream as their data alone."""
    wire = await Wire.connect(h2proxied.proxy.port)
    body = [b"first", b"", b"x" * 3000, b"last"]
    wire.send(wire.headers(1, request_fields(b"/upload", b"POST"), end=False))
    wire.send(
        *(
            data(1, part, pad=pad, end=i == 3)
            for i, (part, pad) in enumerate(zip(body, [0, 255, 17, 1], strict=True))
        )
    )
    reply = await wire.answer(1)
    await wire.close()
    assert reply.status == b"200"
    whole = b"".join(body)
    assert json.loads(reply.body) == {"size": len(whole), "sha256": hashlib.sha256(whole).hexdigest()}


# -- 5.2 and 6.9: flow control -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("send", "outcome"),
    [
        case(
            lambda w: window_update(0, 0),
            goaway_with(E.PROTOCOL_ERROR),
            "6.9 WINDOW_UPDATE of 0 on the connection: PROTOCOL_ERROR",
        ),
        case(
            lambda w: waiting(w) + window_update(1, 0),
            reset(1, E.PROTOCOL_ERROR),
            "6.9 WINDOW_UPDATE of 0 on a stream: PROTOCOL_ERROR",
        ),
        case(
            lambda w: window_update(0, MAX_WINDOW),
            goaway_with(E.FLOW_CONTROL_ERROR),
            "6.9.1 a connection window beyond 2^31-1: FLOW_CONTROL_ERROR",
        ),
        case(
            lambda w: waiting(w) + window_update(1, MAX_WINDOW),
            reset(1, E.FLOW_CONTROL_ERROR),
            "6.9.1 a stream window beyond 2^31-1: FLOW_CONTROL_ERROR",
        ),
        case(
            lambda w: (
                waiting(w) + window_update(1, MAX_WINDOW - 65535) + settings({INITIAL_WINDOW_SIZE: 65536})
            ),
            goaway_with(E.FLOW_CONTROL_ERROR),
            "6.9.2 a SETTINGS_INITIAL_WINDOW_SIZE pushing a stream window beyond 2^31-1: FLOW_CONTROL_ERROR",
        ),
    ],
)
async def test_window_updates(h2proxied: H2Proxied, send: Send, outcome: Outcome) -> None:
    """RFC 9113 §6.9: a WINDOW_UPDATE of 0, or one (or a SETTINGS) that opens a window beyond
    2^31-1, is the error the RFC names."""
    await run_case(h2proxied, send, outcome)


@dataclass
class GatedTokens(Tokens):
    """Token exchanges that wait for ``gate``: until then, no request goes upstream, and the proxy
    gives back none of the window its bodies took."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def fetch(self, audience: str) -> Issued:
        await self.gate.wait()
        return await super().fetch(audience)


STREAM_WINDOW, CONNECTION_WINDOW = 16384, 4 * 16384


@pytest.fixture
async def windowed(h2echo: H2Echo, start_proxy: StartProxy) -> AsyncIterator[H2Proxied]:
    """The proxy with small windows (a stream 16 KiB, the connection 64 KiB), its token held back
    until ``tokens.gate`` is set."""
    tokens = GatedTokens()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(
        api_url, tokens.build(api_url), h2_stream_window=STREAM_WINDOW, h2_connection_window=CONNECTION_WINDOW
    )
    yield H2Proxied(h2echo, tokens, proxy, Observed())
    tokens.gate.set()


def posts(*sizes: int) -> Callable[[Wire], bytes]:
    """POSTs on streams 1, 3, ... with bodies of ``sizes`` (in frames of 16 KiB or less), not ended."""

    def build(wire: Wire) -> bytes:
        out = b""
        for sid, size in zip(range(1, 2 * len(sizes), 2), sizes, strict=True):
            out += open_request(wire, sid)
            out += b"".join(data(sid, b"b" * min(16384, size - at)) for at in range(0, size, 16384))
        return out

    return build


@pytest.mark.parametrize(
    ("send", "outcome"),
    [
        case(posts(STREAM_WINDOW), IGNORED, "6.9.1 DATA filling the stream window exactly is taken"),
        case(
            posts(STREAM_WINDOW + 1),
            reset(1, E.FLOW_CONTROL_ERROR),
            "6.9.1 DATA beyond the stream window: FLOW_CONTROL_ERROR",
        ),
        case(
            posts(STREAM_WINDOW, STREAM_WINDOW, STREAM_WINDOW, STREAM_WINDOW, 1),
            goaway_with(E.FLOW_CONTROL_ERROR),
            "6.9.1 DATA beyond the connection window: FLOW_CONTROL_ERROR",
        ),
        case(
            lambda w: open_request(w) + data(1, b"d" * 8000, pad=255) * 2,  # 16,512 octets, 16,000 of data
            reset(1, E.FLOW_CONTROL_ERROR),
            "6.9.1 padding counts against the window: FLOW_CONTROL_ERROR",
        ),
    ],
)
async def test_a_client_keeps_to_the_windows_the_proxy_grants(
    windowed: H2Proxied, send: Send, outcome: Outcome
) -> None:
    """RFC 9113 §6.9.1: DATA (padding included) beyond the window the proxy granted, on a stream or on
    the connection, is a FLOW_CONTROL_ERROR; up to the window it is taken."""
    assert isinstance(windowed.tokens, GatedTokens)
    await run_case(windowed, send, outcome, release=windowed.tokens.gate)


class OpeningReader(RawH2):
    """A client whose streams open with a window of 1 octet (SETTINGS_INITIAL_WINDOW_SIZE), reopened by
    WINDOW_UPDATEs: 32 KiB when a stream opens, then what each DATA frame took, on the stream and the
    connection. h2 checks every frame the proxy sends against those windows."""

    def _event(self, event: Event) -> None:
        if isinstance(event, DataReceived) and event.flow_controlled_length:
            sid = event.stream_id or 0
            self.answers[sid].body += event.data or b""
            with contextlib.suppress(StreamClosedError):  # the stream's end came in the same read
                self.h2.increment_flow_control_window(event.flow_controlled_length, sid)
            self.h2.increment_flow_control_window(event.flow_controlled_length)
        else:
            super()._event(event)

    @classmethod
    async def start(cls, port: int) -> OpeningReader:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = cls(reader, writer, validate=True)
        client.h2.local_settings = Settings(client=True, initial_values={SettingCodes.INITIAL_WINDOW_SIZE: 1})
        client.h2.initiate_connection()
        client.flush()
        return client

    def download(self, size: int) -> int:
        sid = self.request(b"/download?size=%d" % size)
        self.h2.increment_flow_control_window(32 * 1024, sid)
        self.flush()
        return sid


@pytest.mark.parametrize(
    ("streams", "size"), [(1, 600 * 1024), (40, 40 * 1024)], ids=["one 600 KiB", "40 of 40 KiB"]
)
async def test_a_client_with_a_one_octet_window_gets_every_answer_byte_exact(
    h2proxied: H2Proxied, streams: int, size: int
) -> None:
    """RFC 9113 §6.9: a client announcing SETTINGS_INITIAL_WINDOW_SIZE 1 and opening its windows with
    WINDOW_UPDATEs gets every answer whole and byte-exact, never a frame beyond its windows."""
    client = await OpeningReader.start(h2proxied.proxy.port)
    sids = [client.download(size) for _ in range(streams)]
    answers = [await client.answer(sid, timeout=30) for sid in sids]
    await client.close()
    assert client.error is None
    assert client.goaway is None
    assert all(answer.ended and answer.body == download_body(size) for answer in answers)


class Unacknowledging(RawH2):
    """A client that reopens no window by itself, and counts the PING ACKs and SETTINGS ACKs it got."""

    pongs = 0
    settings_acked = 0

    def _event(self, event: Event) -> None:
        if isinstance(event, DataReceived):
            self.answers[event.stream_id or 0].body += event.data or b""
        elif isinstance(event, PingAckReceived):
            self.pongs += 1
        elif isinstance(event, SettingsAcknowledged):
            self.settings_acked += 1
        else:
            super()._event(event)


async def test_a_lowered_initial_window_is_honoured_mid_stream(h2proxied: H2Proxied) -> None:
    """RFC 9113 §6.9.2: a SETTINGS lowering SETTINGS_INITIAL_WINDOW_SIZE mid-stream shrinks the open
    stream's window (below zero here): the proxy sends only what the new window and later
    WINDOW_UPDATEs allow (h2 raises on any frame beyond), then the answer whole."""
    reader, writer = await asyncio.open_connection("127.0.0.1", h2proxied.proxy.port)
    client = Unacknowledging(reader, writer, validate=True)
    client.h2.initiate_connection()
    client.h2.increment_flow_control_window(2**24)  # only the stream's window counts here
    client.flush()
    size = 256 * 1024
    sid = client.request(b"/download?size=%d" % size)
    answer = client.answers[sid]
    await eventually(lambda: len(answer.body) == 65535, "the first window's bytes")
    client.h2.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 16384})
    client.flush()
    await eventually(lambda: client.settings_acked == 2, "the SETTINGS ACK")  # the preface's, and this one's
    client.h2.increment_flow_control_window(65535 - 16384 + 1000, sid)  # the window: -49151, then 1000
    client.flush()
    await eventually(lambda: len(answer.body) == 65535 + 1000, "the reopened window's bytes")
    client.h2.ping(b"12345678")
    client.flush()
    await eventually(lambda: client.pongs == 1, "the PING ACK")
    assert len(answer.body) == 65535 + 1000
    assert client.error is None
    client.h2.increment_flow_control_window(size, sid)
    client.flush()
    await client.answer(sid)
    await client.close()
    assert client.error is None
    assert answer.ended and answer.body == download_body(size)


async def test_a_raised_initial_window_resumes_a_stalled_answer(h2proxied: H2Proxied) -> None:
    """RFC 9113 §6.9.2: a client that opens its streams with a window of 0 and later raises
    SETTINGS_INITIAL_WINDOW_SIZE (no WINDOW_UPDATE) gets the bytes the raised window allows."""
    wire = await Wire.connect(h2proxied.proxy.port, {INITIAL_WINDOW_SIZE: 0}, reopen=False)
    wire.send(window_update(0, 2**20))
    wire.request(1, b"/download?size=1000")
    await wire.wait(lambda f: f.kind == HEADERS and f.sid == 1, "the answer's head")
    await eventually(lambda: h2proxied.echo.downloaded == 1000, "the answer's bytes in the proxy")
    wire.send(settings({INITIAL_WINDOW_SIZE: 600}))
    await wire.wait(
        lambda f: len([a for a in wire.of_kind(SETTINGS) if a.flags & ACK]) == 2, "the SETTINGS ACK"
    )
    await wire.round_trip()  # what the proxy sent once it took the SETTINGS has come
    await wire.close()
    assert wire.reply(1).body == download_body(600)


async def test_padding_counts_against_the_window_and_is_given_back(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """RFC 9113 §6.1: the proxy counts a DATA frame's padding against its window and gives it back: a
    client honouring the windows (h2 counts the padding) uploads many windows' worth of padded frames
    in full, and the upstream gets the data byte-exact."""
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy: ProxyServer = await start_proxy(
        api_url,
        Tokens().build(api_url),
        h2_stream_window=STREAM_WINDOW,
        h2_connection_window=CONNECTION_WINDOW,
    )
    client = await RawH2.open(proxy.port)
    await eventually(lambda: client.h2.remote_settings.initial_window_size == STREAM_WINDOW, "the SETTINGS")
    body = bytes(range(256)) * 256  # 64 KiB in frames of 100 octets and 200 of padding: 12 stream windows
    sid = client.h2.get_next_available_stream_id()
    client.h2.send_headers(sid, request_fields(b"/upload", b"POST"))
    client.answers[sid] = Answer()
    for at in range(0, len(body), 100):
        while client.h2.local_flow_control_window(sid) < 301:
            client.flush()
            client.changed.clear()
            await asyncio.wait_for(client.changed.wait(), 10)
        client.h2.send_data(sid, body[at : at + 100], pad_length=200, end_stream=at + 100 >= len(body))
    client.flush()
    answer = await client.answer(sid)
    await client.close()
    assert client.error is None
    assert json.loads(answer.body) == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}


async def test_a_client_may_fill_the_default_window_before_the_settings_lowering_it(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """RFC 9113 §3.4, §6.9.2: a client may send before the server's SETTINGS arrive, within the default
    window of 65,535 octets; a proxy announcing a smaller stream window must take those bytes."""
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(
        api_url,
        Tokens().build(api_url),
        h2_stream_window=STREAM_WINDOW,
        h2_connection_window=CONNECTION_WINDOW,
    )
    wire = await Wire.connect(proxy.port, handshake=False)
    body = bytes(range(256)) * 255 + bytes(range(255))  # 65,535 octets
    wire.request(1, b"/upload", body=body)  # written before any frame of the proxy's was read
    reply = await wire.answer(1)
    await wire.close()
    assert json.loads(reply.body) == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}


async def test_streams_beyond_the_limit_before_the_settings_ack_are_refused_not_fatal(
    h2proxied: H2Proxied,
) -> None:
    """RFC 9113 §5.1.2: a client that opens more streams than announced before it acknowledged our
    SETTINGS (gRPC clients burst on a fresh connection) gets REFUSED_STREAM on the extra ones, which
    it may retry, not a connection error; the streams within the limit are served."""
    wire = await Wire.connect(h2proxied.proxy.port, handshake=False)
    sids = list(range(1, 2 * 101, 2))  # one more than the 100 announced
    wire.send(*(wire.headers(sid, request_fields(b"/n%d" % sid)) for sid in sids))
    refused = await wire.wait(lambda f: f.kind in (RST_STREAM, GOAWAY), "a refusal")
    replies = [await wire.answer(sid) for sid in sids[:-1]]
    await wire.round_trip()
    await wire.close()
    assert (refused.kind, refused.sid, refused.code) == (RST_STREAM, sids[-1], E.REFUSED_STREAM)
    assert all(reply.status == b"200" for reply in replies)
    assert not wire.of_kind(GOAWAY), wire.summary()
    assert f"/base/n{sids[-1]}" not in [seen["path"] for seen in h2proxied.echo.seen]
