"""h2spec's checks turned around: the proxy's HTTP/2 client side, as a hostile or odd upstream sees it
(RFC 9113, RFC 7541). The upstream is scripted frame by frame (ScriptedUpstream); a client of the
proxy (Wire) sees what the proxy made of each answer.

An answer the RFC allows reaches the client as the upstream sent it (but for the informational answers
and connection-specific fields the proxy drops); a connection error of the upstream's is a GOAWAY
with the code the RFC names, sent to the upstream, and an error answer (502) to the client, never a
hang; a stream the upstream left unprocessed (GOAWAY, REFUSED_STREAM) is sent again; a malformed
answer (§8.1.1) is a stream error, reset at the upstream, and the client gets the proxy's 502.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from h2.errors import ErrorCodes

from tokenrelay.proxy import ProxyServer
from tokenrelay.proxy.http2.relay import H2Relay
from tokenrelay.testing import FakeClock

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
    PING,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    Frame,
    Headers,
    ScriptedUpstream,
    Wire,
    data,
    frame,
    goaway,
    ping,
    request_fields,
    rst_stream,
    settings,
    window_update,
)
from ..support.proxy import StartProxy, Tokens
from ..support.waiting import eventually

E = ErrorCodes
UNKNOWN = 0x20  # a frame type no RFC defines
OK = [(b":status", b"200"), (b"content-type", b"text/plain")]


@dataclass
class Scripted:
    upstream: ScriptedUpstream
    proxy: ProxyServer

    async def call(
        self, path: bytes = b"/x", *, body: bytes | None = None, values: dict[int, int] | None = None
    ) -> Wire:
        """A client of the proxy with a request on stream 1."""
        client = await Wire.connect(self.proxy.port, values, reopen=not values)
        client.request(1, path, body=body)
        return client


async def scripted_proxy(start_proxy: StartProxy, upstream: ScriptedUpstream, **limits: int) -> Scripted:
    await upstream.start()
    api_url = f"http://127.0.0.1:{upstream.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), upstream_timeout=5.0, **limits)
    return Scripted(upstream, proxy)


@pytest.fixture
async def scripted(start_proxy: StartProxy) -> AsyncIterator[Scripted]:
    """The proxy in front of an upstream the test answers frame by frame."""
    upstream = ScriptedUpstream()
    yield await scripted_proxy(start_proxy, upstream)
    await upstream.stop()


def answer(up: Wire, sid: int, fields: Headers = OK, body: bytes = b"ok") -> None:
    """A plain answer: HEADERS, then the body in one DATA frame with END_STREAM."""
    up.send(up.headers(sid, fields, end=not body))
    if body:
        up.send(data(sid, body, end=True))


async def still_serves(scripted: Scripted) -> None:
    """A new client's request is answered, on whichever connection the proxy sends it (a new one if
    it must)."""
    client = await scripted.call(b"/after")

    def opened() -> tuple[Wire, int] | None:
        for up in scripted.upstream.wires:
            for sent in up.of_kind(HEADERS):
                if sent.headers is not None and (b":path", b"/base/after") in sent.headers:
                    return up, sent.sid
        return None

    await eventually(lambda: opened() is not None, "the request upstream")
    found = opened()
    assert found is not None
    answer(*found, body=b"after")
    reply = await client.answer(1)
    await client.close()
    assert (reply.status, reply.body) == (b"200", b"after")


# -- answers the RFC allows ------------------------------------------------------------------------------


def continued(up: Wire, sid: int) -> bytes:
    """The answer's header block over HEADERS and two CONTINUATIONs, then its DATA."""
    block = up.block(LONG)
    third = len(block) // 3
    return (
        up.headers(sid, block[:third], end=False, end_headers=False)
        + frame(CONTINUATION, 0, sid, block[third : 2 * third])
        + frame(CONTINUATION, END_HEADERS, sid, block[2 * third :])
        + data(sid, b"long", end=True)
    )


LONG = [*OK, (b"x-long", bytes(range(0x21, 0x7F)) * 100), (b"x-other", b"kept")]
GRPC = [(b":status", b"200"), (b"content-type", b"application/grpc")]
TRAILERS = [(b"grpc-status", b"0"), (b"grpc-message", b"fine")]


@pytest.mark.parametrize(
    ("script", "blocks", "body"),
    [
        pytest.param(
            lambda up, sid: (
                up.headers(sid, [(b":status", b"103"), (b"link", b"</a>; rel=preload")], end=False)
                + up.headers(sid, [(b":status", b"100")], end=False)
                + up.headers(sid, OK, end=False)
                + data(sid, b"final", end=True)
            ),
            [OK],
            b"final",
            id="8.1 informational (1xx) answers before the final one are not passed on",
        ),
        pytest.param(continued, [LONG], b"long", id="6.10 an answer over HEADERS and CONTINUATIONs"),
        pytest.param(
            lambda up, sid: up.headers(sid, [*GRPC, *TRAILERS], end=True),
            [[*GRPC, *TRAILERS]],
            b"",
            id="8.1 a trailers-only answer",
        ),
        pytest.param(
            lambda up, sid: (
                up.headers(sid, GRPC, end=False)
                + data(sid, b"\x00\x00\x00\x00\x02hi")
                + up.headers(sid, TRAILERS)
            ),
            [GRPC, TRAILERS],
            b"\x00\x00\x00\x00\x02hi",
            id="8.1 HEADERS, DATA and trailers",
        ),
        pytest.param(
            lambda up, sid: (
                up.headers(sid, OK, end=False)
                + b"".join(data(sid, b"%03d;" % i) for i in range(500))
                + data(sid, b"", end=True)
            ),
            [OK],
            b"".join(b"%03d;" % i for i in range(500)),
            id="6.1 DATA in 500 small frames, END_STREAM on an empty one",
        ),
        pytest.param(
            lambda up, sid: (
                up.headers(sid, OK, end=False, pad=30, priority=bytes(5))
                + data(sid, b"padded", pad=255)
                + data(sid, b"", pad=0, end=True)
            ),
            [OK],
            b"padded",
            id="6.1 6.2 padded HEADERS and DATA",
        ),
        pytest.param(
            lambda up, sid: (
                frame(UNKNOWN, 0xFF, sid, b"ext")
                + up.headers(sid, OK, end=False, flags=0x40)
                + frame(UNKNOWN, 0, 0, b"ext")
                + data(sid, b"body", end=True)
            ),
            [OK],
            b"body",
            id="4.1 frames of unknown type and unknown flags are ignored",
        ),
        pytest.param(
            lambda up, sid: (
                up.headers(
                    sid, [*OK, (b"connection", b"close"), (b"keep-alive", b"5"), (b"x-kept", b"1")], end=False
                )
                + data(sid, b"x", end=True)
            ),
            [[*OK, (b"x-kept", b"1")]],
            b"x",
            id="8.2.2 connection-specific fields are not passed on",
        ),
    ],
)
async def test_answers(
    scripted: Scripted, script: Callable[[Wire, int], bytes], blocks: list[Headers], body: bytes
) -> None:
    """RFC 9113 §6 and §8: an answer framed any way the RFC allows reaches the client whole."""
    client = await scripted.call()
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    up.send(script(up, sid))
    reply = await client.answer(1)
    await client.close()
    assert client.error is None and up.error is None
    assert reply.blocks == blocks
    assert reply.body == body
    assert reply.ended and reply.reset is None
    assert not up.of_kind(GOAWAY) and not up.of_kind(RST_STREAM)


async def test_answer_header_blocks_follow_the_dynamic_table(scripted: Scripted) -> None:
    """RFC 7541 §2.3, §4, §6.3: answers coded against the upstream's dynamic table (fields indexed by
    earlier answers, table size updates that evict them, a never-indexed field) each reach the
    client as the upstream meant them."""
    client = await Wire.connect(scripted.proxy.port)
    answers: list[Headers] = [
        [*OK, (b"x-a", b"alpha"), (b"x-b", b"beta")],
        [*OK, (b"x-a", b"alpha"), (b"x-b", b"beta")],  # all indexed now
        [*OK, (b"x-a", b"gamma"), (b"x-b", b"beta")],  # a name indexed, a new value
        [*OK, (b"x-a", b"alpha"), (b"x-c", b"after a shrink")],  # after a size update to 64 octets
        [*OK, (b"x-a", b"alpha"), (b"x-c", b"after a shrink")],  # after updates to 0, then 4096
        [*OK, (b"x-a", b"alpha"), (b"x-secret", b"never indexed")],
    ]
    sizes = {3: [64], 4: [0, 4096]}
    up: Wire | None = None
    for n, fields in enumerate(answers):
        sid = client.request(2 * n + 1, b"/n%d" % n)
        up = up or await scripted.upstream.connection()
        up_sid, _ = await up.next_request()
        for size in sizes.get(n, []):
            up.encoder.header_table_size = size
        sensitive = [(name, value, name == b"x-secret") for name, value in fields]
        up.send(
            up.headers(up_sid, up.encoder.encode(sensitive), end=False), data(up_sid, b"%d" % n, end=True)
        )
        reply = await client.answer(sid)
        assert reply.blocks == [fields], n
        assert reply.body == b"%d" % n
    await client.close()
    assert up is not None and not up.of_kind(GOAWAY)


# -- answers the RFC forbids -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UpstreamError:
    """What the upstream gets: a GOAWAY with one of ``codes``; or with ``stream``, that error may be a
    RST_STREAM on the stream instead (RFC 9113 §5.4)."""

    codes: tuple[int, ...]
    stream: bool = False

    def sent(self, up: Wire, sid: int) -> Frame | None:
        for received in up.frames:
            if received.kind == GOAWAY or (
                self.stream and received.kind == RST_STREAM and received.sid == sid
            ):
                return received
        return None


def goaway_with(*codes: int) -> UpstreamError:
    return UpstreamError(codes)


def reset_with(*codes: int) -> UpstreamError:
    return UpstreamError(codes, stream=True)


def row(
    build: Callable[[Wire, int], bytes], error: UpstreamError, rule: str, *marks: pytest.MarkDecorator
) -> object:
    return pytest.param(build, error, id=rule, marks=marks)


PLAIN_200 = b"\x88"  # :status 200, the static table's index 8


@pytest.mark.parametrize(
    ("script", "error"),
    [
        row(
            lambda up, sid: settings({ENABLE_PUSH: 1}),
            goaway_with(E.PROTOCOL_ERROR),
            "6.5.2 a server's SETTINGS_ENABLE_PUSH of 1: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: settings({INITIAL_WINDOW_SIZE: MAX_WINDOW + 1}),
            goaway_with(E.FLOW_CONTROL_ERROR),
            "6.5.2 SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1: FLOW_CONTROL_ERROR",
        ),
        row(
            lambda up, sid: settings({MAX_FRAME_SIZE: 100}),
            goaway_with(E.PROTOCOL_ERROR),
            "6.5.2 SETTINGS_MAX_FRAME_SIZE below 2^14: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: frame(SETTINGS, ACK, 0, bytes(6)),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.5 SETTINGS with ACK and a payload: FRAME_SIZE_ERROR",
        ),
        row(
            lambda up, sid: window_update(0, MAX_WINDOW),
            goaway_with(E.FLOW_CONTROL_ERROR),
            "6.9.1 a WINDOW_UPDATE opening the connection window beyond 2^31-1: FLOW_CONTROL_ERROR",
        ),
        row(
            lambda up, sid: window_update(sid, MAX_WINDOW),
            reset_with(E.FLOW_CONTROL_ERROR),
            "6.9.1 a WINDOW_UPDATE opening a stream window beyond 2^31-1: FLOW_CONTROL_ERROR",
        ),
        row(
            lambda up, sid: window_update(0, 0),
            goaway_with(E.PROTOCOL_ERROR),
            "6.9 WINDOW_UPDATE of 0 on the connection: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: data(0, b"x"),
            goaway_with(E.PROTOCOL_ERROR),
            "6.1 DATA on stream 0: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: frame(RST_STREAM, 0, 0, bytes(4)),
            goaway_with(E.PROTOCOL_ERROR),
            "6.4 RST_STREAM on stream 0: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: frame(PING, 0, sid, b"12345678"),
            goaway_with(E.PROTOCOL_ERROR),
            "6.7 PING on a stream: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: frame(GOAWAY, 0, sid, goaway(0, 0)[9:]),
            goaway_with(E.PROTOCOL_ERROR),
            "6.8 GOAWAY on a stream: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: window_update(sid, 0),
            reset_with(E.PROTOCOL_ERROR),
            "6.9 WINDOW_UPDATE of 0 on a stream: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: (
                up.headers(sid, OK, end=False) + data(sid, b"x") + up.headers(sid, TRAILERS, end=False)
            ),
            reset_with(E.PROTOCOL_ERROR),
            "8.1 trailers without END_STREAM: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, OK, end=False) + data(sid, b"x" * 16385, end=True),
            reset_with(E.FRAME_SIZE_ERROR),
            "4.2 DATA beyond SETTINGS_MAX_FRAME_SIZE: FRAME_SIZE_ERROR",
        ),
        row(
            lambda up, sid: data(sid + 2, b"x"),
            goaway_with(E.PROTOCOL_ERROR),
            "5.1 DATA on a stream the proxy never opened: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: frame(CONTINUATION, END_HEADERS, sid, PLAIN_200),
            goaway_with(E.PROTOCOL_ERROR),
            "6.10 CONTINUATION without a HEADERS: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, OK, end_headers=False) + data(sid, b"x"),
            goaway_with(E.PROTOCOL_ERROR),
            "6.2 DATA inside a header block: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: ping(b"short"),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.7 PING of length 5: FRAME_SIZE_ERROR",
        ),
        row(
            lambda up, sid: frame(RST_STREAM, 0, sid, bytes(3)),
            goaway_with(E.FRAME_SIZE_ERROR),
            "6.4 RST_STREAM of length 3: FRAME_SIZE_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, PLAIN_200 + b"\x80"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 6.1 index 0 in an answer: COMPRESSION_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, PLAIN_200 + b"\xc6"),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 2.3.3 an index beyond the table in an answer: COMPRESSION_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, b"\x3f\xe1\x3f" + PLAIN_200),
            goaway_with(E.COMPRESSION_ERROR),
            "RFC 7541 6.3 a table size update above SETTINGS_HEADER_TABLE_SIZE: COMPRESSION_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, [(b"x-first", b"1"), *OK]),
            reset_with(E.PROTOCOL_ERROR),
            "8.3 a pseudo-header after a regular field: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, [(b"content-type", b"text/plain")]),
            reset_with(E.PROTOCOL_ERROR),
            "8.3.2 an answer without :status: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: up.headers(sid, [*OK, (b"X-Upper", b"1")]),
            reset_with(E.PROTOCOL_ERROR),
            "8.2 an uppercase field name in an answer: PROTOCOL_ERROR",
        ),
        row(
            lambda up, sid: (
                up.headers(sid, [*OK, (b"content-length", b"10")], end=False) + data(sid, b"12345", end=True)
            ),
            reset_with(E.PROTOCOL_ERROR),
            "8.1.1 DATA shorter than the answer's content-length: PROTOCOL_ERROR",
        ),
    ],
)
async def test_upstream_protocol_errors(
    scripted: Scripted, script: Callable[[Wire, int], bytes], error: UpstreamError
) -> None:
    """RFC 9113 §4-§8, RFC 7541: a frame the RFC forbids from a server is the error it names, sent to
    the upstream; the client gets an error (a 502 answer, or a reset once its answer began), never
    the broken answer and never a hang; the next request is served."""
    client = await scripted.call()
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    up.send(script(up, sid), ping(b"barrier!"))
    # the proxy's error, or the PING's ACK: then the proxy has taken the script without a word
    await up.wait(lambda f: error.sent(up, sid) is not None or f.payload == b"barrier!", "an answer")
    sent = error.sent(up, sid)
    assert sent is not None and sent.code in error.codes, (sent and E(sent.code), up.summary())
    reply = await client.answer(1)
    await client.close()
    if reply.status:  # the answer had begun
        assert reply.status in (b"200", b"502"), reply
        assert reply.reset is not None or reply.status == b"502", reply
    else:
        assert reply.reset is not None, reply
    if reply.status == b"502":
        assert json.loads(reply.body)["details"][0]["reason"] == "UPSTREAM_FAILED"
    await still_serves(scripted)


# -- streams the upstream left unprocessed ---------------------------------------------------------------


async def test_streams_above_an_upstream_goaway_are_sent_again_on_a_new_connection(
    scripted: Scripted,
) -> None:
    """RFC 9113 §6.8: an upstream GOAWAY whose last stream id is below a stream in flight leaves that
    stream unprocessed: the proxy sends it again on a new connection, and the stream at or below the
    last id finishes on the old one, which is then closed."""
    client = await Wire.connect(scripted.proxy.port)
    client.request(1, b"/first")
    client.request(3, b"/second", body=b"upload " * 100)
    old = await scripted.upstream.connection()
    first, _ = await old.next_request()
    second, _ = await old.next_request()
    await old.request_body(second)
    old.send(goaway(first, E.NO_ERROR))
    new = await scripted.upstream.connection()
    again, fields = await new.next_request()
    assert dict(fields)[b":path"] == b"/base/second"
    body = await new.request_body(again)
    answer(old, first, body=b"one")
    answer(new, again, body=hashlib.sha256(body).hexdigest().encode())
    replies = [await client.answer(1), await client.answer(3)]
    await old.closed()
    await client.close()
    assert [(r.status, r.body) for r in replies] == [
        (b"200", b"one"),
        (b"200", hashlib.sha256(b"upload " * 100).hexdigest().encode()),
    ]
    assert not new.of_kind(GOAWAY)


async def test_a_refused_stream_is_sent_again(scripted: Scripted) -> None:
    """RFC 9113 §8.7: RST_STREAM REFUSED_STREAM means the upstream processed nothing: the proxy sends
    the request again, its body whole, and the client gets the answer to that one."""
    client = await scripted.call(b"/refused", body=b"payload " * 50)
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    await up.request_body(sid)
    up.send(rst_stream(sid, E.REFUSED_STREAM))
    again, fields = await up.next_request()
    assert dict(fields)[b":path"] == b"/base/refused"
    body = await up.request_body(again)
    answer(up, again, body=body)
    reply = await client.answer(1)
    await client.close()
    assert (reply.status, reply.body) == (b"200", b"payload " * 50)


async def test_a_stream_at_or_below_the_goaways_last_id_finishes_and_new_ones_go_elsewhere(
    scripted: Scripted,
) -> None:
    """RFC 9113 §6.8: a graceful GOAWAY lets the streams it names finish on the connection; the proxy
    opens no new stream there, but a new connection for the next request."""
    client = await scripted.call(b"/in-flight")
    old = await scripted.upstream.connection()
    sid, _ = await old.next_request()
    old.send(goaway(sid, E.NO_ERROR))
    await old.round_trip()
    await still_serves(scripted)
    answer(old, sid, body=b"finished")
    reply = await client.answer(1)
    await old.closed()
    await client.close()
    assert (reply.status, reply.body) == (b"200", b"finished")
    assert len(old.of_kind(HEADERS)) == 1


async def test_the_upstreams_concurrency_limit_is_kept(start_proxy: StartProxy) -> None:
    """RFC 9113 §5.1.2: once it has the upstream's SETTINGS_MAX_CONCURRENT_STREAMS of 1, the proxy
    opens no second stream on that connection while one is open: the next goes on a new connection."""
    upstream = ScriptedUpstream({MAX_CONCURRENT_STREAMS: 1})
    scripted = await scripted_proxy(start_proxy, upstream)
    try:
        client = await scripted.call(b"/first")
        first = await upstream.connection()
        sid, _ = await first.next_request()
        answer(first, sid)
        await client.answer(1)
        await first.wait(lambda f: f.kind == SETTINGS and bool(f.flags & ACK), "the SETTINGS ACK")
        client.request(3, b"/two")
        client.request(5, b"/three")
        second = await upstream.connection()
        one, _ = await first.next_request()
        other, _ = await second.next_request()
        await first.round_trip()
        assert len(first.of_kind(HEADERS)) == 2  # the first request's, then one more
        answer(first, one, body=b"a")
        answer(second, other, body=b"b")
        replies = [await client.answer(3), await client.answer(5)]
        await client.close()
        assert sorted(reply.body for reply in replies) == [b"a", b"b"]
    finally:
        await upstream.stop()


# -- flow control, both ways -----------------------------------------------------------------------------


def received(up: Wire, sid: int) -> int:
    """The DATA octets (flow-controlled: padding too) the upstream got on ``sid``."""
    return sum(len(f.payload) for f in up.of_kind(DATA, sid))


@pytest.fixture
async def unopened(start_proxy: StartProxy) -> AsyncIterator[Scripted]:
    """An upstream that reopens no window by itself, with a stream window of 100 octets."""
    upstream = ScriptedUpstream({INITIAL_WINDOW_SIZE: 100}, reopen=False)
    yield await scripted_proxy(start_proxy, upstream)
    await upstream.stop()


async def upload_through(scripted: Scripted, body: bytes) -> tuple[Wire, Wire, int]:
    """A client uploading ``body`` (stream 3) once the proxy's connection to the upstream has taken the
    upstream's SETTINGS (before they arrive, a stream's window is 65,535); the upstream's connection
    window opened wide: only the stream's counts."""
    client = await scripted.call(b"/first")
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    answer(up, sid)
    await client.answer(1)
    await up.wait(lambda f: f.kind == SETTINGS and bool(f.flags & ACK), "the SETTINGS ACK")
    up.send(window_update(0, 2**24))
    client.request(3, b"/upload", body=body)
    sid, _ = await up.next_request()
    return client, up, sid


async def settled(up: Wire, sid: int, octets: int) -> None:
    """The upstream got ``octets`` on ``sid``, and nothing more came after a PING's round trip."""
    await up.wait(lambda f: received(up, sid) >= octets, f"{octets} octets")
    await up.round_trip()
    assert received(up, sid) == octets


async def settings_acked(up: Wire, count: int) -> None:
    await up.wait(
        lambda f: len([a for a in up.of_kind(SETTINGS) if a.flags & ACK]) == count, "the SETTINGS ACK"
    )


async def test_the_upstreams_windows_are_kept_and_a_lowered_one_honoured(unopened: Scripted) -> None:
    """RFC 9113 §6.9, §6.9.2: the proxy sends an upstream no more request body than its windows allow,
    follows a SETTINGS_INITIAL_WINDOW_SIZE lowered mid-stream below what it had sent (the window goes
    below zero), and sends the whole body, byte-exact, as WINDOW_UPDATEs open the windows."""
    body = bytes(range(256)) * 1024  # 256 KiB
    client, up, sid = await upload_through(unopened, body)
    await settled(up, sid, 100)
    up.send(window_update(sid, 400))
    await settled(up, sid, 500)
    up.send(settings({INITIAL_WINDOW_SIZE: 10}))  # the window: 0 + (10 - 100)
    await settings_acked(up, 2)
    up.send(window_update(sid, 90 + 300))  # the window: 300
    await settled(up, sid, 800)
    up.send(window_update(sid, len(body)))
    taken = await up.request_body(sid)
    answer(up, sid, body=b"taken")
    reply = await client.answer(3)
    await client.close()
    assert taken == body
    assert (reply.status, reply.body) == (b"200", b"taken")


async def test_a_raised_initial_window_resumes_a_stalled_upload(unopened: Scripted) -> None:
    """RFC 9113 §6.9.2: an upstream that opens a stalled stream by raising SETTINGS_INITIAL_WINDOW_SIZE
    (no WINDOW_UPDATE) gets the bytes the raised window allows."""
    client, up, sid = await upload_through(unopened, bytes(5000))
    await settled(up, sid, 100)
    up.send(settings({INITIAL_WINDOW_SIZE: 100 + 1000}))
    await settings_acked(up, 2)
    await up.round_trip()  # what the proxy sent once it took the SETTINGS has come
    await client.close()
    assert received(up, sid) == 1100


async def test_an_upstream_sending_beyond_its_window_is_stopped(start_proxy: StartProxy) -> None:
    """RFC 9113 §6.9.1: an upstream sending more DATA than the window the proxy granted (while the
    client reads nothing, so the proxy reopens nothing) gets FLOW_CONTROL_ERROR; the client, whose
    answer had begun, gets its stream reset, and none of those bytes."""
    upstream = ScriptedUpstream()
    scripted = await scripted_proxy(start_proxy, upstream, h2_upstream_stream_window=16384)
    try:
        client = await scripted.call(b"/download", values={INITIAL_WINDOW_SIZE: 0})
        up = await upstream.connection()
        sid, _ = await up.next_request()
        up.send(up.headers(sid, OK, end=False))
        await client.wait(lambda f: f.kind == HEADERS, "the answer's head")
        up.send(data(sid, b"w" * 16384), data(sid, b"beyond"))
        sent = await up.wait(
            lambda f: f.kind == GOAWAY or (f.kind == RST_STREAM and f.sid == sid), "the proxy's error"
        )
        assert sent.code == E.FLOW_CONTROL_ERROR
        reply = await client.answer(1)
        await client.close()
        assert reply.reset is not None
        assert reply.body == b""
        await still_serves(scripted)
    finally:
        await upstream.stop()


async def test_upstream_settings_and_pings_mid_connection_are_answered(scripted: Scripted) -> None:
    """RFC 9113 §6.5.3, §6.7: an upstream's SETTINGS (a smaller HPACK table, a larger frame size)
    and PING mid-connection are acknowledged; the next request's header block begins with the table
    size update the smaller table asks for (RFC 7541 §4.2), and is decoded right."""
    client = await scripted.call(b"/one")
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    answer(up, sid)
    assert (await client.answer(1)).status == b"200"
    up.send(settings({HEADER_TABLE_SIZE: 0, MAX_FRAME_SIZE: 2**20}), ping(b"up-ping!"))
    await up.wait(lambda f: f.kind == PING and f.payload == b"up-ping!", "the PING ACK")
    acks = [f for f in up.of_kind(SETTINGS) if f.flags & ACK]
    assert len(acks) == 2 and all(f.payload == b"" for f in acks)  # the preface's and this one's
    pong = up.of_kind(PING)[0]
    assert pong.flags == ACK
    up.decoder.max_allowed_table_size = 0
    client.request(3, b"/two")
    sid, fields = await up.next_request()
    (opened,) = up.of_kind(HEADERS, sid)
    assert opened.payload[:1] == b"\x20"  # a dynamic table size update to 0
    assert dict(fields)[b":path"] == b"/base/two"
    answer(up, sid, body=b"two")
    reply = await client.answer(3)
    await client.close()
    assert (reply.status, reply.body) == (b"200", b"two")
    assert not up.of_kind(GOAWAY)


async def test_an_upstream_push_promise_gets_an_error_answer_not_a_hang(scripted: Scripted) -> None:
    """RFC 9113 §8.4: the proxy disabled push, so a PUSH_PROMISE is a connection error of type
    PROTOCOL_ERROR: the upstream gets GOAWAY, the client a 502 naming the upstream's failure."""
    client = await scripted.call()
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    up.send(
        frame(PUSH_PROMISE, END_HEADERS, sid, (2).to_bytes(4, "big") + up.block(request_fields(b"/pushed")))
    )
    sent = await up.goaway()
    reply = await client.answer(1)
    await client.close()
    assert sent.code == E.PROTOCOL_ERROR
    assert reply.status == b"502"
    assert json.loads(reply.body)["details"][0]["reason"] == "UPSTREAM_FAILED"
    await still_serves(scripted)


async def test_a_401_that_came_before_the_whole_body_leaves_no_stream_open_at_the_upstream(
    unopened: Scripted,
) -> None:
    """A 401 ending the stream while most of the request body still waits for the upstream's window:
    the call is healed on a new stream, and the first is reset (NO_ERROR) rather than left half open,
    where it would count against the upstream's concurrent streams for as long as the connection
    lives (RFC 9113 §5.1.2, §8.1)."""
    client, up, sid = await upload_through(unopened, bytes(1000))
    await settled(up, sid, 100)  # the rest waits for a window the upstream never opens
    up.send(up.headers(sid, [(b":status", b"401")], end=True))
    again, _ = await up.next_request()
    up.send(window_update(again, 1000))
    assert await up.request_body(again) == bytes(1000)
    answer(up, again, body=b"healed")
    reply = await client.answer(3)
    await client.close()
    assert (reply.status, reply.body) == (b"200", b"healed")
    assert [(f.sid, f.code) for f in up.of_kind(RST_STREAM)] == [(sid, E.NO_ERROR)]


# -- what a client's request carries upstream ------------------------------------------------------------


async def test_a_clients_trailers_cross_under_the_request_policy(scripted: Scripted) -> None:
    """A client's trailers lose what its headers would, and what RFC 9110 §6.5.1 keeps out of trailers:
    the upstream gets the proxy's token only, never a second Authorization, Host, Cookie or forwarding
    field; other trailer fields pass."""
    client = await Wire.connect(scripted.proxy.port)
    client.send(client.headers(1, request_fields(b"/x", b"POST"), end=False), data(1, b"body"))
    late = [
        (b"authorization", b"Bearer client-secret"),
        (b"host", b"evil.example"),
        (b"x-forwarded-host", b"evil.example"),
        (b"cookie", b"session=client-secret"),
        (b"proxy-authorization", b"Basic c2VjcmV0"),
        (b"x-checksum", b"abc"),
    ]
    client.send(client.headers(1, late, end=True))
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    await up.request_body(sid)
    blocks = [sent.headers for sent in up.of_kind(HEADERS, sid) if sent.headers is not None]
    answer(up, sid)
    reply = await client.answer(1)
    await client.close()
    assert reply.status == b"200"
    assert len(blocks) == 2, up.summary()
    assert blocks[1] == [(b"x-checksum", b"abc")]


async def test_a_clients_proxy_fields_never_reach_the_upstream(scripted: Scripted) -> None:
    """Fields named proxy-* (Proxy-Authorization, Proxy-Connection...) stay on the client's hop, as on
    HTTP/1.1; the fields beside them cross."""
    client = await Wire.connect(scripted.proxy.port)
    extra = [(b"proxy-authorization", b"Basic c2VjcmV0"), (b"proxy-foo", b"1"), (b"x-kept", b"yes")]
    client.request(1, b"/x", extra=extra)
    up = await scripted.upstream.connection()
    sid, fields = await up.next_request()
    answer(up, sid)
    await client.answer(1)
    await client.close()
    names = [name for name, _ in fields]
    assert b"x-kept" in names
    assert not [name for name in names if name.startswith(b"proxy-")]


async def test_an_answers_last_data_frame_alone_in_its_read_reaches_the_client(scripted: Scripted) -> None:
    """An answer whose last DATA frame (with END_STREAM) comes by itself, once the client's request
    has ended, reaches the client at once, not with whatever the client sends next."""
    client = await scripted.call()
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    up.send(up.headers(sid, OK, end=False), data(sid, b"first "))
    await client.wait(lambda f: f.kind == DATA and f.sid == 1, "the answer's first bytes")
    up.send(data(sid, b"last", end=True))
    reply = await client.answer(1)
    await client.close()
    assert (reply.status, reply.body, reply.ended) == (b"200", b"first last", True)


async def test_a_slow_request_beside_a_begun_answer_is_not_timed_out(start_proxy: StartProxy) -> None:
    """Once the upstream's answer began, a request body that comes slowly is a bidirectional call's
    own pace (a gRPC stream whose client sends now and then): no body timeout cuts it."""
    upstream = ScriptedUpstream()
    await upstream.start()
    clock = FakeClock()
    api_url = f"http://127.0.0.1:{upstream.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), clock=clock, body_timeout=20.0)
    client = await Wire.connect(proxy.port)
    client.send(client.headers(1, request_fields(b"/chat", b"POST"), end=False), data(1, b"hello"))
    up = await upstream.connection()
    sid, _ = await up.next_request()
    up.send(up.headers(sid, OK, end=False), data(sid, b"welcome"))
    await client.wait(lambda f: f.kind == DATA and f.sid == 1, "the answer's first bytes")
    clock.tick(600.0)
    proxy.check_timeouts()
    client.send(data(1, b"bye", end=True))
    await up.request_body(sid)
    up.send(data(sid, b"farewell", end=True))
    reply = await client.answer(1)
    await client.close()
    await upstream.stop()
    assert (reply.status, reply.body, reply.reset) == (b"200", b"welcomefarewell", None)
    assert up.reply(sid).body == b"hellobye"
    assert not up.of_kind(RST_STREAM)


# -- a malformed answer on a connection every client shares -------------------------------------------

BIG = b"b" * 3000  # 12 references to it decode to over header_bytes (32 KiB) from a few coded bytes


def oversized_head(up: Wire, sid: int) -> bytes:
    """A head whose block is small but decodes past header_bytes: a field indexed (62 in the dynamic
    table), then referenced twelve times by its index alone."""
    block = up.block([*OK, (b"x-big", BIG)]) + b"\xbe" * 12
    return up.headers(sid, block, end=False) + data(sid, b"x", end=True)


@pytest.mark.parametrize(
    ("script", "begun"),
    [
        pytest.param(
            lambda up, sid: (
                up.headers(sid, [*OK, (b"content-length", b"1x")], end=False) + data(sid, b"1x", end=True)
            ),
            False,
            id="a content-length that is no number",
        ),
        pytest.param(
            lambda up, sid: up.headers(sid, [*OK, (b"content-length", b"2"), (b"content-length", b"3")]),
            False,
            id="two content-lengths that disagree",
        ),
        pytest.param(
            lambda up, sid: (
                up.headers(sid, [*OK, (b"content-length", b"10")], end=False) + data(sid, b"12345", end=True)
            ),
            True,
            id="DATA shorter than the content-length",
        ),
        pytest.param(
            lambda up, sid: (
                up.headers(sid, [*OK, (b"content-length", b"3")], end=False) + data(sid, b"12345")
            ),
            True,
            id="DATA beyond the content-length",
        ),
        pytest.param(
            lambda up, sid: (
                up.headers(sid, OK, end=False) + data(sid, b"x") + up.headers(sid, TRAILERS, end=False)
            ),
            True,
            id="trailers without END_STREAM",
        ),
        pytest.param(
            lambda up, sid: up.headers(sid, [(b":status", b"2x0")], end=True),
            False,
            id="a :status that is not three digits",
        ),
        pytest.param(
            lambda up, sid: up.headers(sid, [*OK, *((b"x-f%d" % i, b"v") for i in range(150))], end=True),
            False,
            id="more fields than header_count",
        ),
        pytest.param(oversized_head, False, id="a head that decodes past header_bytes"),
    ],
)
async def test_a_malformed_answer_resets_its_stream_only(
    scripted: Scripted, script: Callable[[Wire, int], bytes], begun: bool
) -> None:
    """RFC 9113 §8.1.1: a malformed answer on one upstream stream is that stream's error: RST_STREAM
    PROTOCOL_ERROR on it, its client gets the proxy's 502 UPSTREAM_FAILED (a reset once its answer
    began), and the other client's stream on the same upstream connection is answered; no GOAWAY."""
    first = await scripted.call(b"/first")
    other = await Wire.connect(scripted.proxy.port)
    up = await scripted.upstream.connection()
    sid, _ = await up.next_request()
    other.request(1, b"/other")
    other_sid, _ = await up.next_request()
    up.send(script(up, sid), ping(b"barrier!"))
    await up.wait(lambda f: f.payload == b"barrier!", "the PING ACK")
    resets = up.of_kind(RST_STREAM, sid)
    assert [reset.code for reset in resets] == [E.PROTOCOL_ERROR], up.summary()
    reply = await first.answer(1)
    await first.close()
    if begun:
        assert (reply.status, reply.reset) == (b"200", E.INTERNAL_ERROR), reply
    else:
        assert reply.status == b"502", reply
        assert json.loads(reply.body)["details"][0]["reason"] == "UPSTREAM_FAILED"
    answer(up, other_sid, [*OK, (b"x-after", BIG)], b"other")
    reply = await other.answer(1)
    await other.close()
    assert (reply.status, reply.body) == (b"200", b"other")
    assert dict(reply.blocks[0])[b"x-after"] == BIG
    assert not up.of_kind(GOAWAY), up.summary()


async def test_a_request_body_held_up_by_the_connections_window_is_not_timed_out(
    start_proxy: StartProxy,
) -> None:
    """A client whose connection window is spent on another stream's bytes, waiting for an upstream
    that reads slowly, cannot send the body of a second stream: that body is not timed out for it."""
    upstream = ScriptedUpstream(reopen=False)  # the upstream grants no window beyond the first 64 KiB
    await upstream.start()
    clock = FakeClock()
    api_url = f"http://127.0.0.1:{upstream.port}/base"
    window = 128 * 1024
    proxy = await start_proxy(api_url, Tokens().build(api_url), clock=clock, h2_connection_window=window)
    client = await Wire.connect(proxy.port)
    client.send(client.headers(1, request_fields(b"/big", b"POST"), end=False))
    client.send(*(data(1, bytes(16384)) for _ in range(window // 16384)))
    client.send(client.headers(3, request_fields(b"/small", b"POST"), end=False))
    up = await upstream.connection()
    await up.next_request()
    await up.next_request()
    await client.round_trip()
    clock.tick(60.0)
    proxy.check_timeouts()
    await client.round_trip(b"swept!!!")
    await client.close()
    await upstream.stop()
    assert not client.of_kind(HEADERS), client.summary()
    assert not client.of_kind(RST_STREAM), client.summary()


async def test_an_upstream_header_block_that_never_ends_times_out(start_proxy: StartProxy) -> None:
    """An upstream's HEADERS without END_HEADERS and nothing more: after header_timeout on the proxy's
    clock that connection ends (GOAWAY ENHANCE_YOUR_CALM), its client gets a 502, and the next request
    goes on a new connection, as a client's unfinished block ends its own."""
    upstream = ScriptedUpstream()
    await upstream.start()
    clock = FakeClock()
    api_url = f"http://127.0.0.1:{upstream.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), clock=clock, upstream_timeout=600.0)
    scripted = Scripted(upstream, proxy)
    client = await scripted.call(b"/stuck")
    up = await upstream.connection()
    sid, _ = await up.next_request()
    up.send(up.headers(sid, OK, end=False, end_headers=False))
    h2 = proxy.context.h2
    assert isinstance(h2, H2Relay)
    conns = h2.pool._conns
    await eventually(lambda: any(c.session.block_since is not None for c in conns), "the block begun")
    clock.tick(10.5)
    proxy.check_timeouts()
    sent = await up.wait(lambda f: f.kind == GOAWAY, "a GOAWAY")
    reply = await client.answer(1)
    await client.close()
    assert sent.code == E.ENHANCE_YOUR_CALM, up.summary()
    assert reply.status == b"502", reply
    await still_serves(scripted)
    await upstream.stop()


@pytest.mark.parametrize(
    "flood",
    [ping(b"floodme!") * 5000, settings({MAX_CONCURRENT_STREAMS: 100}) * 5000],
    ids=["PING", "SETTINGS"],
)
async def test_an_upstream_flooding_frames_that_ask_a_reply_is_calmed(
    scripted: Scripted, flood: bytes
) -> None:
    """5,000 PINGs or SETTINGS from the upstream at once, each asking an ACK that piles up in the
    proxy while the upstream does not read (CVE-2019-9512): that connection ends (GOAWAY
    ENHANCE_YOUR_CALM, unless the close's reset overtakes it), the client's stream gets a 502, and the
    next request is served on a new connection, as a client's flood is calmed."""
    client = await scripted.call()
    up = await scripted.upstream.connection()
    await up.next_request()
    up.send(flood, ping(b"barrier!"))
    with contextlib.suppress(AssertionError):  # no ACK of it once the proxy has closed
        await up.wait(lambda f: f.kind == PING and f.payload == b"barrier!", "the barrier's ACK")
    await up.closed()
    reply = await client.answer(1)
    await client.close()
    assert {f.code for f in up.of_kind(GOAWAY)} <= {E.ENHANCE_YOUR_CALM}, up.summary()
    assert reply.status == b"502", reply
    await still_serves(scripted)
