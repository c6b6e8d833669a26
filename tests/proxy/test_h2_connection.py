"""RelayConnection (h2 without the per-frame repr) answers frames on closed streams as h2 does."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from hyperframe.frame import DataFrame, HeadersFrame, RstStreamFrame

from tokenrelay.proxy.h2_connection import RelayConnection

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
