"""headercoding's memos code what hpack's own coder does, and validate what h2 refuses: the same headers,
tables and refusals, for every block a peer may send."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from h2.exceptions import ProtocolError
from h2.utilities import HeaderValidationFlags, validate_headers
from hpack.exceptions import OversizedHeaderListError
from hpack.hpack import Decoder, Encoder
from hpack.struct import HeaderTuple, NeverIndexedHeaderTuple
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

from tokenrelay.proxy.http2.headercoding import (
    BLOCK_MEMO_ENTRIES,
    BLOCK_MEMO_LENGTH,
    HUFFMAN_MEMO_ENTRIES,
    REQUEST_FLAGS,
    TRAILER_FLAGS,
    BlockMemo,
    HeaderMemo,
    UpstreamDecoder,
    ValidationMemo,
)

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("library", ["hpack"])
def test_the_libraries_whose_private_methods_are_overridden_are_pinned(library: str) -> None:
    """pyproject.toml bounds hpack above and below, and the tests above ran on a version within."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (requirement,) = [Requirement(line) for line in declared if Requirement(line).name == library]
    assert {spec.operator for spec in requirement.specifier} == {">=", "<"}
    assert metadata.version(library) in requirement.specifier
