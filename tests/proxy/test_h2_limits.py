"""The HTTP/2 side facing hostile clients: h2spec-style protocol errors, floods, rapid reset, HPACK bombs."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from h2.errors import ErrorCodes
from h2.events import DataReceived, Event
from h2.settings import SettingCodes, Settings
from hyperframe.frame import (
    DataFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from tokenrelay.proxy import Limits, ProxyServer
from tokenrelay.proxy.http2.downstream import H2Client
from tokenrelay.testing import FakeClock

from ..support.h2client import Answer, RawH2
from ..support.h2server import H2Echo, H2Proxied
from ..support.proxy import Observed, StartProxy, Tokens
from ..support.waiting import eventually

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# the upstream side's bounds: what the upstream may send ahead on a stream, streams per connection
STREAM_WINDOW = Limits().h2_upstream_stream_window
MAX_STREAMS = Limits().h2_upstream_streams


def headers_frame(
    client: RawH2, sid: int, path: bytes = b"/x", *, end: bool = True, extra: bytes = b""
) -> bytes:
    block = client.h2.encoder.encode(
        [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"proxy"), (b":path", path)]
    )
    frame = HeadersFrame(sid, data=block + extra)
    frame.flags.add("END_HEADERS")
    if end:
        frame.flags.add("END_STREAM")
    return frame.serialize()


async def still_serves(h2proxied: H2Proxied) -> None:
    """A new, polite client is served normally."""
    client = await RawH2.open(h2proxied.proxy.port)
    answer = await client.answer(client.request(b"/after"))
    await client.close()
    assert answer.headers[b":status"] == b"200"


def frame(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
    """One frame as bytes, unchecked (hyperframe refuses to build the broken ones)."""
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + sid.to_bytes(4, "big") + payload


DATA, HEADERS, SETTINGS, RST_STREAM, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 4, 3, 6, 7, 8, 9


@pytest.mark.parametrize(
    ("case", "data", "code"),
    [
        ("DATA on stream 0", frame(DATA, 0, 0, b"x"), ErrorCodes.PROTOCOL_ERROR),
        (
            "WINDOW_UPDATE of 0 on the connection",
            frame(WINDOW_UPDATE, 0, 0, bytes(4)),
            ErrorCodes.PROTOCOL_ERROR,
        ),
        (
            "frame beyond SETTINGS_MAX_FRAME_SIZE",
            frame(DATA, 0, 1, b"x" * 20000),
            ErrorCodes.FRAME_SIZE_ERROR,
        ),
        (
            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
            frame(SETTINGS, 0, 0, b"\x00\x04" + (2**31).to_bytes(4, "big")),
            ErrorCodes.FLOW_CONTROL_ERROR,
        ),
        ("PING with a stream id", frame(PING, 0, 1, b"12345678"), ErrorCodes.PROTOCOL_ERROR),
        ("PING of the wrong length", frame(PING, 0, 0, b"1234"), ErrorCodes.FRAME_SIZE_ERROR),
        ("RST_STREAM on an idle stream", frame(RST_STREAM, 0, 5, bytes(4)), ErrorCodes.PROTOCOL_ERROR),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
async def test_protocol_errors_end_the_connection_with_goaway(
    h2proxied: H2Proxied, case: str, data: bytes, code: ErrorCodes
) -> None:
    """A frame RFC 9113 forbids: GOAWAY with the error code it names, the connection closed, others served."""
    client = await RawH2.open(h2proxied.proxy.port)
    client.write(data)
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None, case
    assert goaway.error_code == code, case
    await still_serves(h2proxied)


async def test_bad_headers_are_refused(h2proxied: H2Proxied) -> None:
    """Uppercase names, connection-specific fields and even stream ids from a client are protocol errors."""
    for extra, sid in [
        (b"\x00\x0bX-Uppercase\x01v", 1),
        (b"\x00\x0aconnection\x0akeep-alive", 1),
        (b"", 2),
    ]:
        client = await RawH2.open(h2proxied.proxy.port)
        client.write(headers_frame(client, sid, extra=extra))
        goaway = await client.wait_closed()
        await client.close()
        assert goaway is not None
        assert goaway.error_code == ErrorCodes.PROTOCOL_ERROR
    assert h2proxied.echo.seen == []


async def test_broken_preface_is_refused(h2proxied: H2Proxied) -> None:
    """Bytes that begin like the client preface but are not: the connection is closed, nothing forwarded."""
    reader, writer = await asyncio.open_connection("127.0.0.1", h2proxied.proxy.port)
    writer.write(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
    await asyncio.wait_for(reader.read(-1), 10)
    writer.close()
    assert h2proxied.echo.seen == []


@pytest.mark.parametrize("kind", ["PING", "SETTINGS", "empty DATA"])
async def test_control_frame_floods_get_enhance_your_calm(h2proxied: H2Proxied, kind: str) -> None:
    """Thousands of PING, SETTINGS or empty DATA frames: GOAWAY ENHANCE_YOUR_CALM, then the close."""
    client = await RawH2.open(h2proxied.proxy.port)
    if kind == "PING":
        one = PingFrame(0, opaque_data=b"12345678").serialize()
    elif kind == "SETTINGS":
        one = SettingsFrame(0, {3: 100}).serialize()
    else:
        client.write(headers_frame(client, 1, b"/slow", end=False))
        one = DataFrame(1, data=b"").serialize()
    client.write(one * 5000)
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    await still_serves(h2proxied)


@pytest.mark.parametrize(
    "kind", ["empty DATA on a reset stream", "RST_STREAM on a reset stream", "GOAWAY", "SETTINGS entries"]
)
async def test_frames_that_carry_nothing_read_count_as_control_frames(
    h2proxied: H2Proxied, kind: str
) -> None:
    """Frames the proxy drops unread (empty DATA or RST_STREAM again on a stream the client reset,
    GOAWAY after GOAWAY) and a SETTINGS of 2,730 entries (counted by entry) are a flood too: GOAWAY
    ENHANCE_YOUR_CALM, other clients served."""
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    sid = client.request(b"/slow")
    if kind == "SETTINGS entries":
        flood = frame(SETTINGS, 0, 0, b"\x00\x03\x00\x00\x00\x64" * 2730)  # a 16,380-byte frame
    elif kind == "GOAWAY":
        flood = frame(GOAWAY, 0, 0, bytes(8)) * 5000  # NO_ERROR, last stream 0: stream 1 still finishes
    else:
        client.h2.reset_stream(sid, ErrorCodes.CANCEL)
        client.flush()
        one = (
            frame(DATA, 0, sid, b"") if kind.startswith("empty DATA") else frame(RST_STREAM, 0, sid, bytes(4))
        )
        flood = one * 5000
    client.write(flood)
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    await still_serves(h2proxied)


async def test_window_update_flood_gets_enhance_your_calm(h2proxied: H2Proxied) -> None:
    """Thousands of WINDOW_UPDATEs on the connection, with 100 streams open and no DATA sent to ask
    for them: GOAWAY ENHANCE_YOUR_CALM, the streams reset at the upstream, other clients served."""
    client = await RawH2.open(h2proxied.proxy.port)
    for _ in range(100):
        client.request(b"/slow")
    await eventually(lambda: len(h2proxied.echo.seen) == 100, "the streams upstream")
    client.write(WindowUpdateFrame(0, window_increment=1).serialize() * 5000)
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    await eventually(lambda: h2proxied.echo.resets == 100, "the streams reset upstream")
    await still_serves(h2proxied)


class EagerReader(RawH2):
    """A client that reopens both its windows for every DATA frame, at once."""

    def _event(self, event: Event) -> None:
        if isinstance(event, DataReceived) and event.flow_controlled_length:
            sid = event.stream_id or 0
            self.answers[sid].body += event.data or b""
            if event.stream_ended is None:
                self.h2.increment_flow_control_window(event.flow_controlled_length, sid)
            self.h2.increment_flow_control_window(event.flow_controlled_length)
        else:
            super()._event(event)


async def test_window_updates_answering_data_are_no_flood(h2proxied: H2Proxied) -> None:
    """A client with a 1 KiB stream window that reopens it for every DATA frame (thousands of
    WINDOW_UPDATEs a second) downloads in full: only WINDOW_UPDATEs no DATA asked for are a flood."""
    reader, writer = await asyncio.open_connection("127.0.0.1", h2proxied.proxy.port)
    client = EagerReader(reader, writer, validate=True)
    client.h2.local_settings = Settings(client=True, initial_values={SettingCodes.INITIAL_WINDOW_SIZE: 1024})
    client.h2.initiate_connection()
    client.flush()
    size = 64 * 1024  # on 32 streams: 2048 DATA frames of 1 KiB, each answered by two WINDOW_UPDATEs
    sids = [client.request(b"/download?size=%d" % size) for _ in range(32)]
    answers = [await client.answer(sid, timeout=60) for sid in sids]
    await client.close()
    assert all(answer.ended and len(answer.body) == size for answer in answers)
    assert client.goaway is None


async def windowless_client(port: int) -> RawH2:
    """A client whose streams open with a window of 0: it reads nothing until it says so."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = RawH2(reader, writer, validate=True)
    client.h2.local_settings = Settings(client=True, initial_values={SettingCodes.INITIAL_WINDOW_SIZE: 0})
    client.h2.initiate_connection()
    client.flush()
    return client


async def test_answers_left_unread_are_bounded_per_connection(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """Downloads a client never opens its window for: beyond the bytes a connection may leave unread,
    its streams are reset (ENHANCE_YOUR_CALM); the one that fits is still served once it reads."""
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), h2_buffer_bytes=STREAM_WINDOW + 1024)
    client = await windowless_client(proxy.port)
    size = 2 * STREAM_WINDOW  # the upstream sends STREAM_WINDOW, then waits for the proxy to hand it on
    sids = [client.request(b"/download?size=%d" % size) for _ in range(4)]

    def calmed() -> int:
        return sum(client.answers[sid].reset == ErrorCodes.ENHANCE_YOUR_CALM for sid in sids)

    await eventually(lambda: calmed() == 3, "three streams reset")
    (kept,) = [sid for sid in sids if client.answers[sid].reset is None]
    client.h2.increment_flow_control_window(size, kept)
    client.h2.increment_flow_control_window(size)
    client.flush()
    answer = await client.answer(kept)
    await client.close()
    assert len(answer.body) == size
    await eventually(lambda: h2echo.resets == 3, "the three streams reset upstream")


async def leave_unread(port: int, h2echo: H2Echo) -> None:
    """100 downloads never read: beyond 4 MiB the proxy resets them, the client resets the rest."""
    greedy = await windowless_client(port)
    sids = [greedy.request(b"/download?size=%d" % (2 * STREAM_WINDOW)) for _ in range(MAX_STREAMS)]
    resets = h2echo.resets + MAX_STREAMS
    await eventually(lambda: any(greedy.answers[sid].reset is not None for sid in sids), "a reset")
    for sid in sids:
        if greedy.answers[sid].reset is None:
            greedy.h2.reset_stream(sid)
    greedy.flush()
    await eventually(lambda: h2echo.resets == resets, "every stream reset upstream")
    await greedy.close()


async def test_bytes_dropped_with_a_reset_stream_are_handed_back_to_the_upstream(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """Streams reset with answer bytes unsent hand their window back to the shared upstream connection:
    after a whole upstream window's worth was dropped, the next client's download on it still flows."""
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    # 600 streams reset by one client address within seconds: beyond the rapid-reset budget's default
    proxy = await start_proxy(api_url, Tokens().build(api_url), h2_resets=10_000)
    for _ in range(6):  # each leaves over 5 MiB unsent: more than the upstream's window, together
        await leave_unread(proxy.port, h2echo)
    assert h2echo.connections == 1
    client = await RawH2.open(proxy.port)
    answer = await client.answer(client.request(b"/download?size=%d" % STREAM_WINDOW))
    await client.close()
    assert len(answer.body) == STREAM_WINDOW
    assert h2echo.connections == 1  # on the connection whose window the dropped bytes had used


def queued(proxy: ProxyServer) -> int:
    """The answer bytes the proxy's HTTP/2 streams hold for their clients."""
    streams = [stream for conn in proxy.connections for stream in getattr(conn, "streams", {}).values()]
    return sum(len(data) for stream in streams for data in stream.to_down)


async def test_a_stream_whose_answer_is_never_read_is_reset_after_the_timeout(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """Answer bytes the client takes none of for --proxy-timeout (on the proxy's clock): the stream
    is reset, at the client (CANCEL) and at the upstream, and its bytes let go."""
    clock = FakeClock()
    observed = Observed()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(
        api_url, Tokens().build(api_url), observer=observed, clock=clock, upstream_timeout=60.0
    )
    client = await windowless_client(proxy.port)
    sid = client.request(b"/download?size=%d" % (4 * STREAM_WINDOW))
    # precondition, inside the proxy: the upstream's first STREAM_WINDOW bytes wait there
    await eventually(lambda: queued(proxy) == STREAM_WINDOW, "the answer's bytes in the proxy")
    proxy.check_timeouts()
    clock.tick(60.0)
    proxy.check_timeouts()
    assert observed.codes == []  # the stream is still open
    clock.tick(1.0)
    proxy.check_timeouts()
    assert observed.codes == [200]
    answer = await client.answer(sid)
    await client.close()
    assert answer.reset == ErrorCodes.CANCEL
    assert answer.body == b""
    await eventually(lambda: h2echo.resets == 1, "the stream reset upstream")


async def clocked_proxy(
    h2echo: H2Echo, start_proxy: StartProxy, **limits: float
) -> tuple[ProxyServer, FakeClock]:
    """The proxy in front of the HTTP/2 echo, on a clock that moves only when told."""
    clock = FakeClock()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    return await start_proxy(api_url, Tokens().build(api_url), clock=clock, **limits), clock


async def refused_at_once(port: int, h2echo: H2Echo) -> None:
    """A new connection is refused before any stream: GOAWAY ENHANCE_YOUR_CALM, nothing upstream."""
    seen = len(h2echo.seen)
    client = await RawH2.open(port)
    client.request(b"/x")
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    assert goaway.last_stream_id == 0
    assert len(h2echo.seen) == seen


async def test_rapid_reset_in_one_write_never_reaches_the_upstream(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """CVE-2023-44487: 1,000 streams opened and reset in one write: GOAWAY ENHANCE_YOUR_CALM as the
    budget runs out, and not one stream reaches the upstream (a stream reset in the read that opened
    it is never sent on); the client's next connection is refused until its budget refills."""
    proxy, clock = await clocked_proxy(h2echo, start_proxy)
    client = await RawH2.open(proxy.port)
    # warm: the token held and an upstream connection open, so that a stream could go at once
    assert (await client.answer(client.request(b"/warm"))).headers[b":status"] == b"200"
    burst = b"".join(
        headers_frame(client, sid, b"/slow") + RstStreamFrame(sid, error_code=ErrorCodes.CANCEL).serialize()
        for sid in range(3, 2 * 1000, 2)
    )
    client.write(burst)
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    assert [seen["path"] for seen in h2echo.seen] == ["/base/warm"]
    assert h2echo.resets == 0
    await refused_at_once(proxy.port, h2echo)
    clock.tick(1.0)
    client = await RawH2.open(proxy.port)
    answer = await client.answer(client.request(b"/after"))
    await client.close()
    assert answer.headers[b":status"] == b"200"


async def test_the_reset_budget_outlives_a_reconnect(h2echo: H2Echo, start_proxy: StartProxy) -> None:
    """A client that resets streams upstream and reconnects gets no fresh budget: its second
    connection is calmed once both together go beyond h2_resets, and its third is refused at once."""
    proxy, _ = await clocked_proxy(h2echo, start_proxy, h2_resets=150)
    for rounds, calmed in [(1, False), (2, True)]:
        client = await RawH2.open(proxy.port)
        sids = [client.request(b"/slow") for _ in range(100)]
        upstream = 100 * rounds
        await eventually(lambda: len(h2echo.seen) == upstream, "the streams upstream")  # noqa: B023
        for sid in sids:
            client.h2.reset_stream(sid)
        client.flush()
        if calmed:
            goaway = await client.wait_closed()
            assert goaway is not None
            assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
        else:
            await eventually(lambda: h2echo.resets == 100, "the streams reset upstream")
            assert not client.closed.is_set()
        await client.close()
    await refused_at_once(proxy.port, h2echo)


async def test_a_reconnect_from_another_loopback_address_gets_no_fresh_budget(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """Any local process may connect from any address of 127/8: a client that resets streams upstream
    and reconnects from 127.0.0.2 is calmed as from 127.0.0.1, and its next connection refused."""
    proxy, _ = await clocked_proxy(h2echo, start_proxy, h2_resets=150)
    for rounds, source in [(1, "127.0.0.1"), (2, "127.0.0.2")]:
        client = await RawH2.open(proxy.port, source=source)
        sids = [client.request(b"/slow") for _ in range(100)]
        upstream = 100 * rounds
        await eventually(lambda: len(h2echo.seen) == upstream, "the streams upstream")  # noqa: B023
        for sid in sids:
            client.h2.reset_stream(sid)
        client.flush()
        if source == "127.0.0.2":
            goaway = await client.wait_closed()
            assert goaway is not None
            assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
        else:
            await eventually(lambda: h2echo.resets == 100, "the streams reset upstream")
        await client.close()
    await refused_at_once(proxy.port, h2echo)


async def test_hpack_bomb_is_refused(h2proxied: H2Proxied) -> None:
    """A small header block that decodes to far more than the header list limit ends the connection."""
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    # one 4 KiB field in the dynamic table, then referenced by its one-byte index again and again
    block = client.h2.encoder.encode(
        [
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":authority", b"p"),
            (b":path", b"/x"),
            (b"x-bomb", b"b" * 4000),
        ]
    )
    frame = HeadersFrame(1, data=block + b"\xbe" * 1000)  # 0xbe: dynamic-table index 62, the x-bomb field
    frame.flags.add("END_HEADERS")
    frame.flags.add("END_STREAM")
    client.write(frame.serialize())
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    assert h2proxied.echo.seen == []
    await still_serves(h2proxied)


async def test_an_unfinished_header_block_is_bounded(h2proxied: H2Proxied) -> None:
    """HEADERS without END_HEADERS, then CONTINUATION frames past the 32 KiB header limit: GOAWAY
    ENHANCE_YOUR_CALM, instead of holding up to a MiB per connection until the block ends."""
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    while client.h2.remote_settings.max_concurrent_streams != 100:  # acknowledged: no frame comes between
        client.changed.clear()
        await asyncio.wait_for(client.changed.wait(), 10)
    block = client.h2.encoder.encode(
        [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"p"), (b":path", b"/x")]
    )
    client.write(frame(HEADERS, 0, 1, block) + frame(CONTINUATION, 0, 1, b"\x00" * 16384) * 3)
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    assert h2proxied.echo.seen == []
    await still_serves(h2proxied)


async def settled(client: RawH2) -> None:
    """Until the proxy's SETTINGS are in: no frame of the client's comes between a block's frames."""
    while client.h2.remote_settings.max_concurrent_streams != 100:
        client.changed.clear()
        await asyncio.wait_for(client.changed.wait(), 10)


def request_block(client: RawH2) -> bytes:
    return client.h2.encoder.encode(
        [(b":method", b"GET"), (b":scheme", b"http"), (b":authority", b"p"), (b":path", b"/x")]
    )


async def test_a_header_block_of_empty_continuations_is_bounded(h2proxied: H2Proxied) -> None:
    """HEADERS without END_HEADERS, then empty CONTINUATION frames (no byte bound applies): GOAWAY
    ENHANCE_YOUR_CALM after 64 frames, as h2 bounded a block, instead of a list that grows forever."""
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    await settled(client)
    client.write(frame(HEADERS, 0, 1, request_block(client)) + frame(CONTINUATION, 0, 1, b"") * 100)
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    assert h2proxied.echo.seen == []
    await still_serves(h2proxied)


async def test_continuations_count_as_control_frames(h2proxied: H2Proxied) -> None:
    """Header blocks of 63 empty CONTINUATIONs each, sent again and again on a stream the client
    reset (each block decoded, then refused on that stream alone): a flood, GOAWAY ENHANCE_YOUR_CALM."""
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    await settled(client)
    sid = client.request(b"/slow")
    client.h2.reset_stream(sid, ErrorCodes.CANCEL)
    client.flush()
    block = request_block(client)
    again = (
        frame(HEADERS, 0, sid, block)
        + frame(CONTINUATION, 0, sid, b"") * 62
        + frame(CONTINUATION, 0x4, sid, b"")
    )
    client.write(again * 100)  # 6,400 frames, 100 of them HEADERS
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    await still_serves(h2proxied)


async def test_a_header_block_that_never_ends_times_out(h2echo: H2Echo, start_proxy: StartProxy) -> None:
    """HEADERS without END_HEADERS and nothing more: after header_timeout (10 s on the proxy's clock)
    GOAWAY ENHANCE_YOUR_CALM and the close, as an HTTP/1.1 head that never ends gets 408."""
    clock = FakeClock()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), clock=clock)
    client = await RawH2.open(proxy.port, validate=False)
    await settled(client)
    client.write(frame(HEADERS, 0, 1, request_block(client)))
    await eventually(lambda: any(isinstance(conn, H2Client) for conn in proxy.connections), "served")
    (conn,) = proxy.connections
    assert isinstance(conn, H2Client)
    await eventually(lambda: conn.session._block_sid == 1, "the block begun")  # read, unfinished
    clock.tick(10.0)
    proxy.check_timeouts()
    assert not conn.closed  # not yet: the timeout is not past
    clock.tick(0.5)
    proxy.check_timeouts()
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    assert h2echo.seen == []


async def test_concurrent_stream_limit(h2proxied: H2Proxied) -> None:
    """The proxy announces 100 concurrent streams and holds a client to it."""
    client = await RawH2.open(h2proxied.proxy.port)
    sids = [client.request(b"/slow") for _ in range(100)]
    while client.h2.remote_settings.max_concurrent_streams != 100:
        client.changed.clear()
        await asyncio.wait_for(client.changed.wait(), 10)
    client.write(headers_frame(client, sids[-1] + 2, b"/one-too-many"))
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.PROTOCOL_ERROR
    h2proxied.echo.gate.set()
    assert all(seen["path"] != "/base/one-too-many" for seen in h2proxied.echo.seen)


async def test_protocol_error_logs_no_header_value(
    h2proxied: H2Proxied, caplog: pytest.LogCaptureFixture
) -> None:
    """A malformed header ends the connection; the log says why without quoting the value (a secret)."""
    caplog.set_level(logging.INFO, logger="tokenrelay.proxy")
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    sid = client.request(b"/x", extra=[(b"authorization", b"Bearer sekrit\x00value-123")])
    goaway = await client.wait_closed()
    await client.close()
    assert goaway is not None
    assert goaway.error_code == ErrorCodes.PROTOCOL_ERROR
    assert sid == 1
    errors = [str(getattr(r, "error", "")) for r in caplog.records if "broke the protocol" in r.getMessage()]
    assert errors
    assert "header value" in errors[0]
    assert all("sekrit" not in str(vars(record)) for record in caplog.records)


def bound(proxy: ProxyServer) -> int:
    """The proxy's HTTP/2 streams sent on to the upstream."""
    streams = [stream for conn in proxy.connections for stream in getattr(conn, "streams", {}).values()]
    return sum(stream.up is not None for stream in streams)


async def test_a_stalled_request_body_is_timed_out_as_on_http1(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """A request body that stops coming (a slowloris on HTTP/2) gets body_timeout plus a second for
    every body_min_rate bytes, as on HTTP/1.1 (on the proxy's clock): then 408 BODY_TIMEOUT (gRPC:
    grpc-status 4), and the stream is reset at the upstream."""
    proxy, clock = await clocked_proxy(h2echo, start_proxy, body_timeout=20.0, body_min_rate=500)
    client = await RawH2.open(proxy.port)
    fields = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"proxy"), (b":path", b"/up")]
    grpc = [(b"content-type", b"application/grpc")]
    sids = []
    for extra, body in [([], b"x"), (grpc, b"y" * 15_000)]:  # allowed 20 s, and 20 + 30 s
        sid = client.h2.get_next_available_stream_id()
        client.h2.send_headers(sid, [*fields, *extra])
        client.h2.send_data(sid, body)
        client.answers[sid] = Answer()
        sids.append(sid)
    client.flush()
    await eventually(lambda: bound(proxy) == 2, "both streams upstream")
    clock.tick(19.0)
    proxy.check_timeouts()
    clock.tick(2.0)
    proxy.check_timeouts()
    first = await client.answer(sids[0])
    assert first.headers[b":status"] == b"408"
    assert json.loads(first.body)["details"][0]["reason"] == "BODY_TIMEOUT"
    await eventually(lambda: h2echo.resets == 1, "the stream reset upstream")
    clock.tick(28.0)
    proxy.check_timeouts()
    assert not client.answers[sids[1]].headers  # 49 s: within its 50
    clock.tick(2.0)
    proxy.check_timeouts()
    second = await client.answer(sids[1])
    await client.close()
    assert second.headers[b"grpc-status"] == b"4"
    await eventually(lambda: h2echo.resets == 2, "the stream reset upstream")
    assert h2echo.seen == []
