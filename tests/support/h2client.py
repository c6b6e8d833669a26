"""A raw HTTP/2 client on the h2 library: the conformance, flood and reset cases no polite client sends."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from h2.config import H2Configuration
from h2.connection import ConnectionInputs, H2Connection, H2ConnectionStateMachine
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from h2.exceptions import ProtocolError

Headers = list[tuple[bytes, bytes]]


class GoawayKeepsStreams(H2ConnectionStateMachine):
    """h2 takes a received GOAWAY for the end of the connection and then refuses every frame; RFC 9113
    §6.8 lets the streams up to its last_stream_id finish: here a GOAWAY leaves the connection open.
    The test's own copy: the proxy's engine is not h2's any more than it must be."""

    def process_input(self, input_: ConnectionInputs) -> list[Event]:
        if input_ is ConnectionInputs.RECV_GOAWAY:
            return []
        return super().process_input(input_)


@dataclass
class Answer:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    body: bytes = b""
    trailers: dict[bytes, bytes] = field(default_factory=dict)
    reset: int | None = None  # the RST_STREAM code, when the stream was reset
    ended: bool = False


class RawH2:
    """One HTTP/2 connection; its events are collected in the background."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, validate: bool) -> None:
        config = H2Configuration(client_side=True, header_encoding=None, validate_outbound_headers=validate)
        self.h2 = H2Connection(config)
        self.h2.state_machine = GoawayKeepsStreams()  # a graceful GOAWAY: the answers still come
        self.reader = reader
        self.writer = writer
        self.answers: dict[int, Answer] = {}
        self.goaway: ConnectionTerminated | None = None
        self.error: ProtocolError | None = None  # what the proxy sent that h2 refused (a window overrun...)
        self.closed = asyncio.Event()
        self.changed = asyncio.Event()
        self._task = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, port: int, *, validate: bool = True, source: str | None = None) -> RawH2:
        """A connection to the proxy on loopback; ``source``: the local address it comes from."""
        local = None if source is None else (source, 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=local)
        client = cls(reader, writer, validate)
        client.h2.initiate_connection()
        client.flush()
        return client

    def flush(self) -> None:
        if not self.writer.is_closing():
            self.writer.write(self.h2.data_to_send())

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    def request(
        self, path: bytes, *, method: bytes = b"GET", body: bytes = b"", extra: Headers | None = None
    ) -> int:
        sid = self.h2.get_next_available_stream_id()
        headers = [(b":method", method), (b":scheme", b"http"), (b":authority", b"proxy"), (b":path", path)]
        self.h2.send_headers(sid, [*headers, *(extra or [])], end_stream=not body)
        if body:
            self.h2.send_data(sid, body, end_stream=True)
        self.answers[sid] = Answer()
        self.flush()
        return sid

    async def answer(self, sid: int, timeout: float = 10) -> Answer:
        async with asyncio.timeout(timeout):
            while True:
                answer = self.answers[sid]
                if answer.ended or answer.reset is not None or self.closed.is_set():
                    return answer
                self.changed.clear()
                await self.changed.wait()

    async def wait_closed(self, timeout: float = 10) -> ConnectionTerminated | None:
        """The GOAWAY the proxy sent (None if none), once it has closed the connection."""
        async with asyncio.timeout(timeout):
            await self.closed.wait()
        return self.goaway

    async def close(self) -> None:
        self._task.cancel()
        self.writer.close()

    async def _read(self) -> None:
        try:
            while data := await self.reader.read(65536):
                for event in self.h2.receive_data(data):
                    self._event(event)
                self.flush()
                self.changed.set()
        except OSError:
            pass  # the proxy cut the connection
        except ProtocolError as exc:
            self.error = exc  # the proxy answered a broken frame the test sent, or broke a rule itself
        finally:
            self.closed.set()
            self.changed.set()

    def _event(self, event: Event) -> None:
        sid = getattr(event, "stream_id", 0) or 0
        answer = self.answers.get(sid)
        if isinstance(event, ConnectionTerminated):
            self.goaway = event
        elif answer is None:
            return
        elif isinstance(event, ResponseReceived):
            answer.headers = dict(event.headers or [])
        elif isinstance(event, DataReceived):
            answer.body += event.data or b""
            self.h2.acknowledge_received_data(event.flow_controlled_length or 0, sid)
        elif isinstance(event, TrailersReceived):
            answer.trailers = dict(event.headers or [])
        elif isinstance(event, StreamEnded):
            answer.ended = True
        elif isinstance(event, StreamReset):
            answer.reset = int(event.error_code or 0)
