"""h2_connection's classes do what h2's and hpack's originals do: the same frames, headers and tables."""

from __future__ import annotations

import struct
import tomllib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest
from h2.config import H2Configuration
from h2.connection import ConnectionInputs, ConnectionState, H2Connection, H2ConnectionStateMachine
from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError
from h2.frame_buffer import FrameBuffer
from h2.utilities import HeaderValidationFlags, validate_headers
from hpack.exceptions import OversizedHeaderListError
from hpack.hpack import Decoder, Encoder
from hpack.struct import HeaderTuple, NeverIndexedHeaderTuple
from hyperframe.frame import DataFrame, HeadersFrame, RstStreamFrame
from hypothesis import example, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

from tokenrelay.proxy.http2.connection import (
    BLOCK_MEMO_ENTRIES,
    BLOCK_MEMO_LENGTH,
    HUFFMAN_MEMO_ENTRIES,
    REQUEST_FLAGS,
    TRAILER_FLAGS,
    BlockMemo,
    HeaderMemo,
    RelayConnection,
    RelayFrameBuffer,
    UpstreamDecoder,
    ValidationMemo,
)
from tokenrelay.proxy.http2.upstream import GoawayKeepsStreams

ROOT = Path(__file__).resolve().parents[2]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def request(client: H2Connection, sid: int, *, end: bool) -> bytes:
    block = client.encoder.encode(
        [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/x")]
    )
    frame = HeadersFrame(sid, data=block)
    frame.flags.add("END_HEADERS")
    if end:
        frame.flags.add("END_STREAM")
    return frame.serialize()


def data(sid: int) -> bytes:
    return DataFrame(sid, data=b"late").serialize()


def reset_by_server(server: H2Connection) -> None:
    server.reset_stream(1, ErrorCodes.CANCEL)


def answered(server: H2Connection) -> None:
    server.send_headers(1, [(b":status", b"200")], end_stream=True)


def nothing(server: H2Connection) -> None:
    pass


def run(
    cls: type[H2Connection], ended: bool, act: Callable[[H2Connection], None], steps: list[bytes]
) -> tuple[list[str], bytes]:
    """The events and bytes the server sends for ``steps``, after a request (``ended`` or not) and ``act``."""
    client = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    server = cls(H2Configuration(client_side=False, header_encoding=None))
    server.initiate_connection()
    server.receive_data(PREFACE + request(client, 1, end=ended))
    act(server)
    server.data_to_send()
    events = [type(event).__name__ for event in server.receive_data(b"".join(steps))]
    return events, server.data_to_send()


@pytest.mark.parametrize(
    ("ended", "act", "steps", "reset"),
    [
        (False, reset_by_server, [data(1)], 1),
        (True, answered, [data(1)], 1),  # closed both ways
        (False, nothing, [request(H2Connection(), 5, end=True), data(3)], 3),  # skipped over
        (False, nothing, [data(1)], 0),  # open: no reset
    ],
)
def test_closed_streams_as_h2(
    ended: bool, act: Callable[[H2Connection], None], steps: list[bytes], reset: int
) -> None:
    """Frames on reset, ended and skipped streams get the same RST_STREAM or connection error as with h2."""
    relayed = run(RelayConnection, ended, act, steps)
    assert relayed == run(H2Connection, ended, act, steps)
    closed = bytes(RstStreamFrame(reset, error_code=ErrorCodes.STREAM_CLOSED).serialize()) if reset else b""
    assert relayed[1] == closed


def test_upstream_decoder_as_hpack() -> None:
    """The upstream's answer headers decode to what hpack decodes, repeated, indexed or not, long or short."""
    encoder = Encoder()
    blocks = []
    for n in range(3):
        blocks.append(
            encoder.encode(
                [
                    (b":status", b"200"),
                    (b"server", b"nginx/1.22.1"),
                    (b"content-type", b"application/grpc"),
                    (b"x-long", b"v" * 300),  # beyond the memo's length: decoded each time
                    (b"grpc-message", b"retry %d" % n, True),  # never indexed: a literal each time
                    (b"x-custom-name", b"%d" % n, True),  # a literal name too
                ]
            )
        )
    plain = Encoder()
    blocks.append(plain.encode([(b"x-plain", b"no huffman")], huffman=False))
    relayed, original = UpstreamDecoder(), Decoder()
    for block in blocks * 2:
        assert relayed.decode(block, raw=True) == original.decode(block, raw=True)


def test_upstream_decoder_memo_bounded() -> None:
    """Thousands of distinct Huffman-coded values keep the memo at most HUFFMAN_MEMO_ENTRIES long."""
    encoder, decoder = Encoder(), UpstreamDecoder()
    for n in range(3 * HUFFMAN_MEMO_ENTRIES):
        value = b"value-%d" % n
        assert decoder.decode(encoder.encode([(b"x-n", value, True)]), raw=True) == [(b"x-n", value)]
    assert 0 < len(decoder._huffman) <= HUFFMAN_MEMO_ENTRIES


# Header lists a peer may send again and again, or once: a few names and values, some sensitive.
FIELDS = st.tuples(
    st.sampled_from([b":status", b"content-type", b"grpc-status", b"x-a", b"x-b", b"date"]),
    st.sampled_from([b"200", b"application/grpc", b"0", b"v" * 40, b"Mon, 23 Nov 2026", b""]),
    st.booleans(),
)
LISTS = st.lists(st.lists(FIELDS, min_size=1, max_size=6), min_size=1, max_size=5)
# What a peer does between lists: send one again, index nothing new (nginx), or shrink its table.
STEPS = st.lists(
    st.tuples(st.integers(0, 4), st.sampled_from(["plain", "again", "no-index", "resize"])), max_size=40
)


def entries(table: object) -> list[tuple[bytes, bytes]]:
    return list(getattr(table, "dynamic_entries"))  # noqa: B009 - hpack's table, for comparison only


@settings(max_examples=150, deadline=None)
@given(lists=LISTS, steps=STEPS)
def test_block_memo_decodes_as_hpack(
    lists: list[list[tuple[bytes, bytes, bool]]], steps: list[tuple[int, str]]
) -> None:
    """Whatever blocks a peer sends, in whatever order, BlockMemo (and UpstreamDecoder) return what
    hpack's Decoder returns, and leave the same table behind."""
    encoder = Encoder()
    memo, upstream, original = BlockMemo(), UpstreamDecoder(), Decoder()
    for index, how in steps:
        fields = lists[index % len(lists)]
        if how == "resize":
            encoder.header_table_size = 256
        for _ in range(2 if how == "again" else 1):
            if how == "no-index":  # literals with indexing that the peer never reads back, as nginx sends
                block = b"".join(encoder._encode_literal(n, v, b"\x40", True) for n, v, _ in fields)
                for n, v, _ in fields:  # the peer's table as the decoders will hold it
                    encoder.header_table.add(n, v)
            else:
                block = encoder.encode([(n, v, sensitive) for n, v, sensitive in fields])
            expected = original.decode(block, raw=True)
            assert memo.decode(block, raw=True) == expected
            assert upstream.decode(block, raw=True) == expected
        assert entries(memo.header_table) == entries(original.header_table)
        assert entries(upstream.header_table) == entries(original.header_table)


@settings(max_examples=150, deadline=None)
@given(lists=LISTS, steps=STEPS)
def test_header_memo_encodes_as_hpack(
    lists: list[list[tuple[bytes, bytes, bool]]], steps: list[tuple[int, str]]
) -> None:
    """HeaderMemo codes every list to the bytes hpack's Encoder codes it to; a field marked never
    indexed is never coded as its indexable twin, nor the other way round."""
    memo, original = HeaderMemo(), Encoder()
    for index, how in steps:
        if how == "resize":
            memo.header_table_size = original.header_table_size = 256
        fields = [
            NeverIndexedHeaderTuple(n, v) if sensitive else HeaderTuple(n, v)
            for n, v, sensitive in lists[index % len(lists)]
        ]
        assert memo.encode(fields) == original.encode(fields)
        if how == "again":
            assert memo.encode(list(fields)) == original.encode(list(fields))
        assert entries(memo.header_table) == entries(original.header_table)


def test_block_memo_refuses_an_hpack_bomb_every_time() -> None:
    """A block that decodes past the size limit is refused each time it comes, never remembered."""
    encoder = Encoder()
    bomb = encoder.encode([(b"x-big", b"v" * 3000)] + [(b"x-big", b"v" * 3000)] * 30)
    memo = BlockMemo(max_header_list_size=16 * 1024)
    for _ in range(2):
        with pytest.raises(OversizedHeaderListError):
            memo.decode(bomb, raw=True)


@pytest.mark.parametrize(
    ("headers", "flags"),
    [
        (
            [
                (b":method", b"GET"),
                (b":path", b"/"),
                (b":scheme", b"http"),
                (b":authority", b"a"),
                (b"X-Upper", b"v"),
            ],
            REQUEST_FLAGS,
        ),
        (
            [
                (b":method", b"GET"),
                (b":path", b"/"),
                (b":scheme", b"http"),
                (b":authority", b"a"),
                (b"connection", b"close"),
            ],
            REQUEST_FLAGS,
        ),
        ([(b":method", b"GET"), (b":scheme", b"http")], REQUEST_FLAGS),  # no :path
        (
            [(b":method", b"GET"), (b":path", b"/"), (b":scheme", b"http"), (b":authority", b"a")],
            TRAILER_FLAGS,
        ),  # pseudo in trailers
    ],
    ids=["uppercase", "connection", "no-path", "pseudo-in-trailers"],
)
def test_validation_memo_refuses_what_h2_refuses_every_time(
    headers: list[tuple[bytes, bytes]], flags: HeaderValidationFlags
) -> None:
    """A list h2 refuses is refused on every call, also after a valid list was remembered."""
    memo = ValidationMemo()
    memo.check(
        [(b":method", b"GET"), (b":path", b"/"), (b":scheme", b"http"), (b":authority", b"a")], REQUEST_FLAGS
    )
    for _ in range(2):
        with pytest.raises(ProtocolError):
            memo.check(headers, flags)
    with pytest.raises(ProtocolError):
        list(validate_headers(headers, flags))  # h2 itself agrees


def test_block_memo_reads_a_dynamic_index_afresh_after_the_table_changed() -> None:
    """The same bytes name another field once the table has changed ("the newest entry"): BlockMemo
    decodes them to what they mean now."""
    peer, memo = Encoder(), BlockMemo()
    for field in [(b"x-a", b"1"), (b"x-b", b"2")]:
        memo.decode(peer.encode([field]), raw=True)  # a literal, added to both tables
        newest = peer.encode([field])
        assert newest == b"\xbe"  # index 62: the newest dynamic entry
        assert memo.decode(newest, raw=True) == [field]


def test_header_memo_codes_a_never_indexed_field_as_hpack_does() -> None:
    """A field sent never-indexed, then the same field indexable: coded as hpack codes each."""
    memo, original = HeaderMemo(), Encoder()
    for field in [
        NeverIndexedHeaderTuple(b"x-a", b"1"),
        HeaderTuple(b"x-a", b"1"),
        HeaderTuple(b"x-a", b"1"),
    ]:
        assert memo.encode([field]) == original.encode([field])


def test_the_memos_stay_bounded_whatever_a_client_sends() -> None:
    """Thousands of distinct blocks and lists, each sent twice, keep each memo at most
    BLOCK_MEMO_ENTRIES long, and no block or list over BLOCK_MEMO_LENGTH bytes is kept at all."""
    peer, decoder, encoder, valid = Encoder(), BlockMemo(), HeaderMemo(), ValidationMemo()
    request = [(b":method", b"GET"), (b":path", b"/"), (b":scheme", b"http"), (b":authority", b"a")]
    for n in range(5 * BLOCK_MEMO_ENTRIES):
        fields = [*request, (b"x-n", b"%d" % n)]
        for _ in range(2):
            decoder.decode(peer.encode(fields), raw=True)
            encoder.encode([HeaderTuple(name, value) for name, value in fields])
            valid.check(fields, REQUEST_FLAGS)
    assert 0 < len(decoder._blocks) <= BLOCK_MEMO_ENTRIES
    assert 0 < len(encoder._lists) <= BLOCK_MEMO_ENTRIES
    assert 0 < len(valid._valid) <= BLOCK_MEMO_ENTRIES
    big = [*request, (b"x-big", b"v" * BLOCK_MEMO_LENGTH)]
    peer, decoder, encoder, valid = Encoder(), BlockMemo(), HeaderMemo(), ValidationMemo()
    for _ in range(2):
        decoder.decode(peer.encode([(name, value, True) for name, value in big], huffman=False), raw=True)
        encoder.encode([NeverIndexedHeaderTuple(name, value) for name, value in big])
        valid.check(big, REQUEST_FLAGS)
    assert (decoder._blocks, encoder._lists, valid._valid) == ({}, {}, {})


@pytest.mark.parametrize("library", ["h2", "hpack"])
def test_the_libraries_whose_private_methods_are_overridden_are_pinned(library: str) -> None:
    """pyproject.toml bounds h2 and hpack above and below, and the tests above ran on a version within."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (requirement,) = [Requirement(line) for line in declared if Requirement(line).name == library]
    assert {spec.operator for spec in requirement.specifier} == {">=", "<"}
    assert metadata.version(library) in requirement.specifier


def test_goaway_keeps_streams_moves_as_h2_does_but_for_a_received_goaway() -> None:
    """For every state and input, the proxy's connection state machine ends where h2's does, with the
    same events or the same refusal; only a received GOAWAY leaves the connection as it was."""
    for state in ConnectionState:
        for input_ in ConnectionInputs:
            ours, theirs = GoawayKeepsStreams(), H2ConnectionStateMachine()
            ours.state = theirs.state = state
            if input_ is ConnectionInputs.RECV_GOAWAY:
                assert ours.process_input(input_) == []
                assert ours.state is state
                continue
            try:
                expected: list[object] | type[ProtocolError] = list(theirs.process_input(input_))
            except ProtocolError:
                expected = ProtocolError
            try:
                got: list[object] | type[ProtocolError] = list(ours.process_input(input_))
            except ProtocolError:
                got = ProtocolError
            assert (got, ours.state) == (expected, theirs.state), (state, input_)


# What a relay sends on its streams: headers (answers, trailers, requests), DATA of any size.
SENDS = st.lists(
    st.one_of(
        st.tuples(
            st.just("headers"),
            st.sampled_from([1, 3, 5]),
            st.sampled_from([b"200", b"100", b"401"]),
            st.sampled_from([0, 8, 20000]),  # 20000: past the frame size, CONTINUATIONs follow
            st.booleans(),
        ),
        st.tuples(
            st.just("data"),
            st.sampled_from([1, 3, 5]),
            st.just(b""),
            st.sampled_from([0, 1, 100, 16384, 16385, 70000]),  # 70000: past the stream's window
            st.booleans(),
        ),
    ),
    max_size=12,
)


def sending(
    cls: type[H2Connection], client_side: bool, sends: list[tuple[str, int, bytes, int, bool]]
) -> list[object]:
    """Everything ``cls`` shows after each of ``sends``: the refusal, the bytes, the windows and states."""
    peer = H2Connection(H2Configuration(client_side=not client_side, header_encoding=None))
    config = H2Configuration(
        client_side=client_side,
        header_encoding=None,
        validate_outbound_headers=False,
        normalize_outbound_headers=False,
    )
    conn = cls(config)
    conn.initiate_connection()
    peer.initiate_connection()
    if client_side:
        conn.send_headers(1, [(b":method", b"POST"), (b":path", b"/a"), (b":authority", b"h")])
    else:
        conn.receive_data(PREFACE + request(peer, 1, end=False) + request(peer, 3, end=True))
    seen: list[object] = []
    for what, sid, status, size, end in sends:
        try:
            if what == "headers":
                first = (b":method", b"POST") if client_side and status != b"100" else (b":status", status)
                conn.send_headers(sid, [first, (b"x-a", b"v" * size), (b"x-b", b"w")], end_stream=end)
            else:
                conn.send_data(sid, b"d" * size, end_stream=end)
            outcome: object = conn.data_to_send()
        except Exception as exc:  # whichever refusal: both must raise it
            outcome = (type(exc), str(exc), conn.data_to_send())
        streams = sorted(
            (sid, s.state_machine.state, s.outbound_flow_control_window, s._authority, s.request_method)
            for sid, s in conn.streams.items()
        )
        seen.append((outcome, conn.outbound_flow_control_window, streams, conn.state_machine.state))
    return seen


@settings(max_examples=60, deadline=None)
@given(client_side=st.booleans(), sends=SENDS)
def test_relay_connection_sends_headers_and_data_as_h2(
    client_side: bool, sends: list[tuple[str, int, bytes, int, bool]]
) -> None:
    """The HEADERS, CONTINUATION and DATA frames RelayConnection packs itself are h2's, byte for byte,
    with the same stream states, windows and refusals (closed streams, trailers without END_STREAM,
    windows and frame sizes exceeded, informational answers)."""
    assert sending(RelayConnection, client_side, sends) == sending(H2Connection, client_side, sends)


# Frames as a peer may send them: DATA and HEADERS with any flags (padding, priority, a header block
# cut in CONTINUATIONs), on stream 0 too, longer than the frame size, and a PING among them.
FRAMES = st.lists(
    st.tuples(
        st.sampled_from([0x0, 0x1, 0x9, 0x6]),  # DATA, HEADERS, CONTINUATION, PING
        st.integers(0, 0xFF),  # flags, undefined bits too
        st.sampled_from([0, 1, 3, 0x80000001]),  # the reserved bit set on the last
        st.sampled_from([0, 1, 8, 300, 16385]),
    ),
    max_size=8,
)


def framing(buffer: FrameBuffer, raw: bytes, cuts: list[int]) -> list[object]:
    """Each frame (its type and attributes) or refusal the buffer gives, fed ``raw`` cut at ``cuts``."""
    buffer.max_frame_size = 16384
    seen: list[object] = []
    start = 0
    for end in [*sorted(cuts), len(raw)]:
        buffer.add_data(raw[start:end])
        start = max(start, end)
        try:
            for frame in buffer:
                fields = {k: v for k, v in vars(frame).items() if k != "flags"}
                seen.append((type(frame), set(frame.flags), fields))
        except Exception as exc:  # whichever refusal: both must raise it
            seen.append((type(exc), str(exc)))
            break
    return seen


@settings(max_examples=200, deadline=None)
@example(frames=[(0x0, 0x1, 1, 8), (0x1, 0x5, 3, 8)], near=[(0, -1), (1, -1)])  # a body one byte short
@example(frames=[(0x0, 0x0, 1, 8)], near=[(0, -9)])  # the header one byte short
@given(frames=FRAMES, near=st.lists(st.tuples(st.integers(0, 8), st.integers(-10, 10)), max_size=4))
def test_relay_frame_buffer_parses_as_h2(
    frames: list[tuple[int, int, int, int]], near: list[tuple[int, int]]
) -> None:
    """The DATA and HEADERS frames RelayFrameBuffer builds itself have hyperframe's attributes, and
    every frame, header block and refusal (frame too long, stream 0, bad padding) comes as with h2's,
    however the bytes arrive (cut near the frames' ends: a header or a body one byte short)."""
    coded = [
        struct.pack(">HBBBL", size >> 8, size & 0xFF, kind, flags, sid) + bytes([size % 7]) * size
        for kind, flags, sid, size in frames
    ]
    ends = [sum(map(len, coded[: i + 1])) for i in range(len(coded))] or [0]
    cuts = [max(0, ends[i % len(ends)] + offset) for i, offset in near]
    raw = b"".join(coded)
    assert framing(RelayFrameBuffer(), raw, cuts) == framing(FrameBuffer(), raw, cuts)
