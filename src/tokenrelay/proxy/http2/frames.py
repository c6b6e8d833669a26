"""HTTP/2's wire format (RFC 9113 §4, §6, §7): frame types, flags, settings, error codes, and the
frames the proxy writes, packed as bytes."""

from __future__ import annotations

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # §3.4, what a client sends first

# §6: frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0x0, 0x1, 0x2, 0x3, 0x4
PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0x5, 0x6, 0x7, 0x8, 0x9

# §6: flags (END_STREAM and ACK share a bit, on different frame types)
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# §7: error codes
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB

# §6.5.2: settings
HEADER_TABLE_SIZE = 0x1
ENABLE_PUSH = 0x2
MAX_CONCURRENT_STREAMS = 0x3
INITIAL_WINDOW_SIZE = 0x4
MAX_FRAME_SIZE = 0x5
MAX_HEADER_LIST_SIZE = 0x6

DEFAULT_WINDOW = 65535  # §6.9.2: every window's size until SETTINGS or WINDOW_UPDATE change it
DEFAULT_FRAME_SIZE = 16384  # §4.2: SETTINGS_MAX_FRAME_SIZE's initial value (and the least allowed)
LARGEST_FRAME_SIZE = 2**24 - 1
LARGEST_WINDOW = 2**31 - 1  # §6.9.1

# the 9-byte frame header: length (24 bits) and type in one word, then flags and stream id
HEADER = struct.Struct(">LBL")
_SETTING = struct.Struct(">HL")
_U32 = struct.Struct(">L")
_GOAWAY = struct.Struct(">LL")


def frame(kind: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload) << 8 | kind, flags, sid) + payload


def settings(values: dict[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(_SETTING.pack(key, value) for key, value in values.items()))


def parse_settings(payload: bytes) -> list[tuple[int, int]]:
    return [_SETTING.unpack_from(payload, i) for i in range(0, len(payload), 6)]


def window_update(sid: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, sid, _U32.pack(increment))


def rst_stream(sid: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, sid, _U32.pack(code))


def goaway(last_sid: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, _GOAWAY.pack(last_sid, code) + debug)


def u32(payload: bytes, offset: int = 0) -> int:
    value: int = _U32.unpack_from(payload, offset)[0]
    return value
