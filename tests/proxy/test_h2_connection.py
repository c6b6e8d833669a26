"""h2_connection's RelayConnection and UpstreamDecoder do what h2's and hpack's originals do."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from hpack.hpack import Decoder, Encoder
from hyperframe.frame import DataFrame, HeadersFrame, RstStreamFrame

from tokenrelay.proxy.h2_connection import HUFFMAN_MEMO_ENTRIES, RelayConnection, UpstreamDecoder

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
