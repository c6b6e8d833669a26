"""h2 and hpack without the costs a relay pays again and again for the same frames and headers.

A gRPC client sends the same header block on every call, and a server answers every call with the
same headers and trailers: ``BlockMemo`` and ``HeaderMemo`` remember what a block decodes to and what
a header list encodes to, for as long as the HPACK table they depend on has not changed
(``CountingTable``); they use only hpack's public methods. ``RelayConnection`` and
``UpstreamDecoder`` override one private method each with the library's own code, changed only
where their docstrings say, and ``RelayConnection.unfinished_block`` reads h2's frame buffer.
tests/proxy/test_h2_connection.py checks them against the originals, for the versions
pyproject.toml pins (h2 4.4, hpack 4.0 to 4.2): pinned rather than falling back to h2's own classes
on other versions, because a fallback would be a second code path that no test runs, and would lose
the CPU these classes save without anyone noticing.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable
from typing import Any, TypeVar

from h2.config import H2Configuration
from h2.connection import AllowedStreamIDs, ConnectionInputs, H2Connection
from h2.errors import ErrorCodes
from h2.events import Event
from h2.exceptions import ProtocolError, StreamClosedError, StreamIDTooLowError, TooManyStreamsError
from h2.frame_buffer import FrameBuffer
from h2.stream import StreamInputs
from h2.utilities import (
    HeaderValidationFlags,
    authority_from_headers,
    extract_method_header,
    is_informational_response,
    validate_headers,
)
from hpack.exceptions import HPACKDecodingError
from hpack.hpack import DEFAULT_MAX_HEADER_LIST_SIZE, Decoder, Encoder, decode_integer
from hpack.huffman_table import decode_huffman
from hpack.struct import HeaderTuple, NeverIndexedHeaderTuple
from hpack.table import HeaderTable
from hyperframe.flags import Flags
from hyperframe.frame import DataFrame, Frame, HeadersFrame, RstStreamFrame

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


class ValidationMemo:
    """h2's own validation of the header lists a client sends (RFC 9113 §8.2 and §8.3: names, pseudo-
    header fields, connection-specific fields, ``te``, ``:path``, Host against ``:authority``), run
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


# RFC 9113 §4.1, §6.1, §6.2, §6.10: a frame's 9-byte header (length, type, flags, stream id), and the
# frame types and flags the fast paths send.
FRAME_HEADER = struct.Struct(">HBBBL")
DATA, HEADERS, CONTINUATION = 0x0, 0x1, 0x9
END_STREAM, END_HEADERS = 0x1, 0x4
_SEND_HEADERS_C, _SEND_DATA_C = ConnectionInputs.SEND_HEADERS, ConnectionInputs.SEND_DATA
_SEND_HEADERS_S, _SEND_DATA_S = StreamInputs.SEND_HEADERS, StreamInputs.SEND_DATA
_SEND_END_STREAM = StreamInputs.SEND_END_STREAM


def frame_header(length: int, kind: int, flags: int, sid: int) -> bytes:
    return FRAME_HEADER.pack(length >> 8, length & 0xFF, kind, flags, sid)


_DATA_FLAGS = Flags(DataFrame.defined_flags)._valid_flags
_HEADERS_FLAGS = Flags(HeadersFrame.defined_flags)._valid_flags
PADDED, PRIORITY = 0x8, 0x20


def _flags(valid: set[str], names: set[str]) -> Flags:
    flags = Flags.__new__(Flags)
    flags._valid_flags = valid  # never changed by hyperframe: shared by every frame of its type
    flags._flags = names
    return flags


class RelayFrameBuffer(FrameBuffer):
    """h2's FrameBuffer, building the frames a relay receives most, DATA and a whole HEADERS block,
    unpadded and without priority, with the attributes hyperframe's parsing gives them but without
    its per-frame chain of constructors, flag sets and memoryviews; every other frame (and any
    frame inside a header block) is hyperframe's, parsed by h2's own ``__next__``."""

    def __next__(self) -> Frame:
        data = self._data
        if len(data) < 9 or self._headers_buffer:
            return super().__next__()
        high, low, kind, bits, sid = FRAME_HEADER.unpack_from(data)
        sid &= 0x7FFFFFFF
        plain_data = kind == DATA and not bits & PADDED
        whole_headers = kind == HEADERS and not bits & (PADDED | PRIORITY) and bits & END_HEADERS
        if not sid or not (plain_data or whole_headers):
            return super().__next__()
        length = (high << 8) + low
        if len(data) < length + 9:
            raise StopIteration
        self._validate_frame_length(length)
        body = bytes(memoryview(data)[9 : 9 + length])
        del data[: 9 + length]
        frame: Frame
        if kind == DATA:
            frame = DataFrame.__new__(DataFrame)
            names = {"END_STREAM"} if bits & END_STREAM else set()
            frame.__dict__.update(
                stream_id=sid,
                flags=_flags(_DATA_FLAGS, names),
                body_len=length,
                pad_length=0,
                data=body,
            )
        else:
            frame = HeadersFrame.__new__(HeadersFrame)
            names = {"END_STREAM", "END_HEADERS"} if bits & END_STREAM else {"END_HEADERS"}
            frame.__dict__.update(
                stream_id=sid,
                flags=_flags(_HEADERS_FLAGS, names),
                body_len=length,
                pad_length=0,
                depends_on=0,
                stream_weight=0,
                exclusive=False,
                data=body,
            )
        return frame


class RelayConnection(H2Connection):
    """An H2Connection that remembers coded header blocks (BlockMemo, HeaderMemo), does not format
    the frames it receives, and writes the DATA and HEADERS it sends on an open stream as bytes.

    h2 formats every received frame with ``repr()`` for a trace log line, even when nothing logs (its
    DummyLogger drops the line): about 5% of the proxy's CPU per gRPC call. Sending, h2 builds a
    hyperframe object per frame (flags as a set, serialized field by field), re-encodes every header
    list and computes validation flags that a connection validating nothing never reads:
    ``send_headers`` and ``send_data`` below make the same state-machine moves and window
    accounting as h2's, and pack the frame themselves.
    """

    def __init__(self, config: H2Configuration, decoder: type[BlockMemo] = BlockMemo) -> None:
        super().__init__(config)
        # before any frame: h2 adjusts them as SETTINGS arrive, never replaces them
        self.encoder = HeaderMemo()
        self.decoder = decoder(self.decoder.max_header_list_size)
        self.incoming_buffer = RelayFrameBuffer(server=not config.client_side)  # h2 sets its size per read

    def unfinished_block(self) -> int:
        """The bytes of a header block still waiting for its END_HEADERS (h2 holds up to 64 frames of
        it, a MiB at the default frame size, before it refuses one)."""
        held = self.incoming_buffer._headers_buffer
        return sum(len(frame.data) for frame in held) if held else 0

    def send_headers(
        self,
        stream_id: int,
        headers: Iterable[Any],
        end_stream: bool = False,
        priority_weight: int | None = None,
        priority_depends_on: int | None = None,
        priority_exclusive: bool | None = None,
    ) -> None:
        """h2's send_headers, for a header list of bytes on a stream already open, or a client's new
        one: the state moves of H2Stream.send_headers, one HEADERS frame (CONTINUATIONs past the frame
        size) packed here. A server's new stream (push), priority, an informational answer, or a
        connection that normalizes or validates what it sends go through h2's own."""
        stream = self.streams.get(stream_id)
        config = self.config
        if (
            (stream is None and not config.client_side)
            or type(headers) is not list
            or not headers
            or priority_weight is not None
            or priority_depends_on is not None
            or priority_exclusive is not None
            or config.normalize_outbound_headers
            or config.validate_outbound_headers
            or ((stream is None or not stream.state_machine.client) and is_informational_response(headers))
        ):
            super().send_headers(
                stream_id, headers, end_stream, priority_weight, priority_depends_on, priority_exclusive
            )
            return
        if stream is None:  # a client's new stream, as h2 opens it
            most = self.remote_settings.max_concurrent_streams
            open_ = self.open_outbound_streams  # a property that also forgets closed streams
            if open_ + 1 > most:
                raise TooManyStreamsError(f"Max outbound streams is {most}, {open_} open")
            self.state_machine.process_input(_SEND_HEADERS_C)
            stream = self._get_or_create_stream(stream_id, AllowedStreamIDs.ODD)
        else:
            self.state_machine.process_input(_SEND_HEADERS_C)
        machine = stream.state_machine
        machine.process_input(_SEND_HEADERS_S)
        block = self.encoder.encode(headers)  # before END_STREAM, as h2: the table changes regardless
        flags = 0
        if end_stream:
            machine.process_input(_SEND_END_STREAM)
            flags = END_STREAM
        if machine.trailers_sent and not end_stream:
            raise ProtocolError("Trailers must have END_STREAM set.")
        if machine.client and stream._authority is None:
            stream._authority = authority_from_headers(headers)
        stream.request_method = extract_method_header(headers)
        size = self.max_outbound_frame_size
        if len(block) <= size:
            self._data_to_send += frame_header(len(block), HEADERS, flags | END_HEADERS, stream_id) + block
            return
        blocks = [block[i : i + size] for i in range(0, len(block), size)]
        out = [frame_header(len(blocks[0]), HEADERS, flags, stream_id), blocks[0]]
        for i, part in enumerate(blocks[1:], 2):
            last = END_HEADERS if i == len(blocks) else 0
            out += (frame_header(len(part), CONTINUATION, last, stream_id), part)
        self._data_to_send += b"".join(out)

    def send_data(
        self, stream_id: int, data: bytes | memoryview, end_stream: bool = False, pad_length: Any = None
    ) -> None:
        """h2's send_data, unpadded bytes within the windows and the frame size on a stream already
        open: the state moves and window accounting of h2's, one DATA frame packed here."""
        stream = self.streams.get(stream_id)
        size = len(data)
        if (
            stream is None
            or pad_length is not None
            or type(data) is not bytes
            or size > self.outbound_flow_control_window
            or size > stream.outbound_flow_control_window
            or size > self.max_outbound_frame_size
        ):
            super().send_data(stream_id, data, end_stream, pad_length)
            return
        self.state_machine.process_input(_SEND_DATA_C)
        machine = stream.state_machine
        machine.process_input(_SEND_DATA_S)
        flags = 0
        if end_stream:
            machine.process_input(_SEND_END_STREAM)
            flags = END_STREAM
        stream.outbound_flow_control_window -= size
        self._data_to_send += frame_header(size, DATA, flags, stream_id) + data
        self.outbound_flow_control_window -= size

    def _receive_frame(self, frame: Frame) -> list[Event]:
        events: list[Event]
        try:
            frames, events = self._frame_dispatch_table[frame.__class__](frame)
        except StreamClosedError as e:
            # closed by RST_STREAM: a stream error, answered with RST_STREAM; else a connection error
            if self._stream_is_closed_by_reset(e.stream_id):
                f = RstStreamFrame(e.stream_id)
                f.error_code = e.error_code
                self._prepare_for_sending([f])
                events = e._events
            else:
                raise
        except StreamIDTooLowError as e:
            if self._stream_is_closed_by_reset(e.stream_id):
                f = RstStreamFrame(e.stream_id)
                f.error_code = ErrorCodes.STREAM_CLOSED
                self._prepare_for_sending([f])
                events = []
            elif self._stream_is_closed_by_end(e.stream_id):
                raise StreamClosedError(e.stream_id) from e
            else:
                raise
        else:
            self._prepare_for_sending(frames)
        return events


class UpstreamDecoder(BlockMemo):
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
