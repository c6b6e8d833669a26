"""h2 and hpack without two costs a relay pays on every frame and every answer it receives.

Both classes override one private method with the library's own code (h2 4.1 to 4.4, hpack 4.x),
changed only where their docstrings say; tests/proxy/test_h2_connection.py checks them against the
originals.
"""

from __future__ import annotations

import logging

from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import Event
from h2.exceptions import StreamClosedError, StreamIDTooLowError
from hpack.exceptions import HPACKDecodingError
from hpack.hpack import DEFAULT_MAX_HEADER_LIST_SIZE, Decoder, decode_integer
from hpack.huffman_table import decode_huffman
from hpack.struct import HeaderTuple, NeverIndexedHeaderTuple
from hyperframe.frame import Frame, RstStreamFrame

# hpack logs every header it codes at debug level, and the coded blocks, where scrub cannot see a token
# (Huffman-coded): never, whatever --log-level says.
logging.getLogger("hpack").setLevel(logging.WARNING)

HUFFMAN_MEMO_LENGTH = 128  # longer strings (a token, a large cookie) are decoded every time
HUFFMAN_MEMO_ENTRIES = 256  # ... and the memo starts over once it holds this many


class RelayConnection(H2Connection):
    """An H2Connection that does not format the frames it receives.

    h2 formats every received frame with ``repr()`` for a trace log line, even when nothing logs (its
    DummyLogger drops the line): about 5% of the proxy's CPU per gRPC call.
    """

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


class UpstreamDecoder(Decoder):
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
                if len(self._huffman) >= HUFFMAN_MEMO_ENTRIES:
                    self._huffman.clear()
                self._huffman[coded] = plain
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
