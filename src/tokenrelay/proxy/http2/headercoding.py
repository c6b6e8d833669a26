"""HPACK (RFC 7541) without the costs a relay pays again and again for the same headers.

A gRPC client sends the same header block on every call, and a server answers every call with the
same headers and trailers: ``BlockMemo`` and ``HeaderMemo`` remember what a block decodes to and what
a header list encodes to, for as long as the HPACK table they depend on has not changed
(``CountingTable``); they use only hpack's public methods. ``UpstreamDecoder`` overrides one private
method with hpack's own code, changed only where its docstring says; ``ValidationMemo`` runs h2's
header validation once per distinct list. tests/proxy/test_h2_headercoding.py checks them against
hpack's own coder, for the versions pyproject.toml pins (hpack 4.0 to 4.2): pinned rather than
falling back to hpack's own classes on other versions, because a fallback would be a second code
path that no test runs, and would lose the CPU these classes save without anyone noticing.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from h2.utilities import HeaderValidationFlags, validate_headers
from hpack.exceptions import HPACKDecodingError, OversizedHeaderListError
from hpack.hpack import DEFAULT_MAX_HEADER_LIST_SIZE, Decoder, Encoder, decode_integer
from hpack.huffman_table import decode_huffman
from hpack.struct import HeaderTuple, NeverIndexedHeaderTuple
from hpack.table import HeaderTable, table_entry_size

# hpack logs every header it codes at debug level, and the coded blocks, where scrub cannot see a token
# (Huffman-coded): never, whatever --log-level says.
logging.getLogger("hpack").setLevel(logging.WARNING)

BLOCK_MEMO_LENGTH = 1024  # header blocks (coded) and header lists (their fields) remembered up to this
BLOCK_MEMO_ENTRIES = 32  # ... and each memo starts over once it holds this many
HUFFMAN_MEMO_LENGTH = 128  # longer strings (a token, a large cookie) are decoded every time
HUFFMAN_MEMO_ENTRIES = 256  # ... and the memo starts over once it holds this many

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, entries: int = BLOCK_MEMO_ENTRIES) -> None:
    """Keep ``value`` under ``key``; a memo holding ``entries`` already starts over, so that no peer
    can make it grow."""
    if len(memo) >= entries:
        memo.clear()
    memo[key] = value


class CountingTable(HeaderTable):
    """hpack's dynamic table, counting what it went through: entries added (``changes``, which also
    counts resizes), resizes alone, and reads of dynamic entries (``lookups``); with ``journal`` set,
    it also lists the entries added. What a block meant, and what it did to the table, can then be
    remembered and replayed."""

    changes = 0
    resizes = 0
    lookups = 0
    journal: list[tuple[bytes, bytes]] | None = None

    def add(self, name: bytes, value: bytes) -> None:
        self.changes += 1
        if self.journal is not None:
            self.journal.append((name, value))
        super().add(name, value)

    def get_by_index(self, index: int) -> tuple[bytes, bytes]:
        if index > HeaderTable.STATIC_TABLE_LENGTH:
            self.lookups += 1
        return super().get_by_index(index)

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        self.changes += 1
        self.resizes += 1
        HeaderTable.maxsize.fset(self, value)  # type: ignore[attr-defined]


class BlockMemo(Decoder):
    """hpack's Decoder, remembering what blocks decode to and what they add to its table.

    A gRPC client sends the same block on every call, and a server answers with the same headers
    and trailers: about a fifth of the proxy's CPU per call went to decoding them again. A block
    that read no dynamic entry means the same whatever the table holds (a server such as nginx adds
    its answer's literals to the table every time and never reads them back); one that did is
    remembered for the table's state it was decoded in (``changes``). A hit replays the block's
    additions to the table, so the table ends as decoding would have left it. The key holds the size
    limit too; a block that resized the table, or that was refused (HPACK bombs), is never
    remembered; the memo holds at most BLOCK_MEMO_ENTRIES blocks of at most BLOCK_MEMO_LENGTH bytes,
    whoever sends them.
    """

    def __init__(self, max_header_list_size: int = DEFAULT_MAX_HEADER_LIST_SIZE) -> None:
        super().__init__(max_header_list_size)
        self.header_table = self.table = CountingTable()
        self._blocks: dict[
            tuple[int | None, int, bool, bytes],
            tuple[tuple[HeaderTuple, ...], tuple[tuple[bytes, bytes], ...]],
        ] = {}

    def decode(self, data: bytes, raw: bool = False) -> list[HeaderTuple]:
        table = self.table
        if type(data) is not bytes or len(data) > BLOCK_MEMO_LENGTH:
            return list(super().decode(data, raw))
        limit = self.max_header_list_size
        known = self._blocks.get((None, limit, raw, data)) or self._blocks.get(
            (table.changes, limit, raw, data)
        )
        if known is not None:
            headers, added = known
            for name, value in added:
                table.add(name, value)
            return list(headers)
        changes, lookups, resizes = table.changes, table.lookups, table.resizes
        table.journal = []
        try:
            decoded = list(super().decode(data, raw))
            added = tuple(table.journal)
        finally:
            table.journal = None
        if table.resizes == resizes:
            state = None if table.lookups == lookups else changes
            remember(self._blocks, (state, limit, raw, data), (tuple(decoded), added))
        return decoded


class HeaderMemo(Encoder):
    """hpack's Encoder, remembering the blocks of header lists that left its table unchanged.

    After the first call, a gRPC call's request (and an answer's headers and trailers) are all in
    the table, or never indexed: the same list codes to the same block while the table holds what it
    held. The key holds each field's class, so a never-indexed field (``NeverIndexedHeaderTuple``,
    an upstream's sensitive header passed on) is never taken for an indexable one that compares equal.
    """

    def __init__(self) -> None:
        super().__init__()
        self.header_table = self.table = CountingTable()
        self._lists: dict[tuple[object, ...], bytes] = {}

    def encode(self, headers: object, huffman: bool = True) -> bytes:
        table = self.table
        if table.resized or type(headers) is not list:
            return super().encode(headers, huffman)  # type: ignore[arg-type]
        key = (table.changes, huffman, *map(type, headers), *headers)
        known = self._lists.get(key)
        if known is not None:
            return known
        block = super().encode(headers, huffman)
        fields = sum(len(name) + len(value) for name, value in headers)  # what the key keeps alive
        if table.changes == key[0] and len(block) <= BLOCK_MEMO_LENGTH and fields <= BLOCK_MEMO_LENGTH:
            remember(self._lists, key, block)
        return block


# How h2 validates what a server receives: a request's headers, and its trailers.
REQUEST_FLAGS = HeaderValidationFlags(
    is_client=False, is_trailer=False, is_response_header=False, is_push_promise=False
)
TRAILER_FLAGS = REQUEST_FLAGS._replace(is_trailer=True)
# ... and what a client receives: an answer's headers, and its trailers
ANSWER_FLAGS = REQUEST_FLAGS._replace(is_client=True, is_response_header=True)
ANSWER_TRAILER_FLAGS = REQUEST_FLAGS._replace(is_client=True, is_trailer=True)


class ValidationMemo:
    """h2's own validation of the header lists a client sends (RFC 9113 §8.2 and §8.3: names, pseudo-
    header fields, connection-specific fields, ``te``, ``:path``, Host against ``:authority``), and
    of the answers an upstream sends (§8.3.2: ``:status``, names, pseudo-header fields), run
    once per distinct list on a connection instead of on every call: h2's chain of generators cost
    about a tenth of the proxy's CPU per gRPC call, for a list the client sends every time.
    ``check`` raises h2's ProtocolError for a list h2 would have refused. Lists of at most
    BLOCK_MEMO_LENGTH bytes are remembered, BLOCK_MEMO_ENTRIES of them at most."""

    def __init__(self) -> None:
        self._valid: dict[tuple[object, ...], None] = {}

    def check(self, headers: list[tuple[bytes, bytes]], flags: HeaderValidationFlags) -> None:
        key = (flags.is_trailer, *headers)
        if key in self._valid:
            return
        for _ in validate_headers(headers, flags):
            pass
        if sum(len(name) + len(value) for name, value in headers) <= BLOCK_MEMO_LENGTH:
            remember(self._valid, key, None)


class DecodedOversized(OversizedHeaderListError):
    """A header list beyond the limit, in a block decoded whole: the HPACK table is in step with the
    peer's, so the connection may go on (the list is refused as a stream error)."""


class _WholeBlocks(Decoder):
    """hpack's Decoder, decoding a block over the header list limit to its end before refusing it.

    hpack stops at the limit, mid-block, leaving its table short of the entries the rest of the block
    adds: only the connection can end then. A block is decoded under a limit of its own coded size
    times 64 (an entry costs at least one coded byte, and a decoded field tuple about 64 bytes beyond
    its strings, which a literal's coded bytes bound and an indexed field shares with the table), so
    the work stays bounded by the block, whose size Session bounds."""

    def decode(self, data: bytes, raw: bool = False) -> list[HeaderTuple]:
        limit = self.max_header_list_size
        self.max_header_list_size = max(limit, 64 * len(data))
        try:
            headers = list(super().decode(data, raw))
        finally:
            self.max_header_list_size = limit
        if sum(table_entry_size(name, value) for name, value in headers) > limit:
            raise DecodedOversized(f"A header list larger than {limit}")
        return headers


class UpstreamDecoder(BlockMemo, _WholeBlocks):
    """hpack's Decoder, remembering what the upstream's Huffman-coded strings decode to.

    A server that does not index its answer headers in HPACK's dynamic table (nginx never does) sends
    the same Huffman-coded literals (``server``, ``content-type``, ``grpc-status``...) in every
    answer, and hpack decodes them bit by bit in Python each time: about a tenth of the proxy's CPU
    per gRPC call. Only for the upstream's answers: what clients send is never kept.
    ``_decode_literal`` is hpack's own (4.x), with the memo in front of ``decode_huffman``.
    """

    def __init__(self, max_header_list_size: int = DEFAULT_MAX_HEADER_LIST_SIZE) -> None:
        super().__init__(max_header_list_size)
        self._huffman: dict[bytes, bytes] = {}

    def _unhuffman(self, coded: bytes) -> bytes:
        plain = self._huffman.get(coded)
        if plain is None:
            plain = decode_huffman(coded)
            if len(coded) <= HUFFMAN_MEMO_LENGTH:
                remember(self._huffman, coded, plain, HUFFMAN_MEMO_ENTRIES)
        return plain

    def _decode_literal(self, data: bytes | memoryview, should_index: bool) -> tuple[HeaderTuple, int]:
        if isinstance(data, memoryview):
            data = data.tobytes()
        if should_index:
            indexed_name = data[0] & 0x3F
            name_len = 6
            not_indexable = False
        else:
            high_byte = data[0]
            indexed_name = high_byte & 0x0F
            name_len = 4
            not_indexable = bool(high_byte & 0x10)
        name: bytes
        if indexed_name:
            index, consumed = decode_integer(data, name_len)
            name = self.header_table.get_by_index(index)[0]
            total_consumed = consumed
            length = 0
        else:
            data = data[1:]
            length, consumed = decode_integer(data, 7)
            name = data[consumed : consumed + length]
            if len(name) != length:
                raise HPACKDecodingError("Truncated header block")
            if data[0] & 0x80:
                name = self._unhuffman(name)
            total_consumed = consumed + length + 1
        data = data[consumed + length :]
        length, consumed = decode_integer(data, 7)
        value = data[consumed : consumed + length]
        if len(value) != length:
            raise HPACKDecodingError("Truncated header block")
        if data[0] & 0x80:
            value = self._unhuffman(value)
        total_consumed += length + consumed
        header = NeverIndexedHeaderTuple(name, value) if not_indexable else HeaderTuple(name, value)
        if should_index:
            self.header_table.add(name, value)
        return header, total_consumed
