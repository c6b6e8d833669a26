"""HTTP/2 connections to the upstream, shared by the streams of every HTTP/2 client.

h2c with prior knowledge to an ``http://`` upstream, TLS with ALPN ``h2`` to an ``https://`` one. A
connection carries streams until it holds as many as the upstream allows
(SETTINGS_MAX_CONCURRENT_STREAMS, at most ``Limits.h2_upstream_streams``); then the pool opens another.
New connections are single-flight: a burst of streams waits for one handshake instead of opening one
connection each.

Flow control: the proxy acknowledges the upstream's DATA only once the client's side has taken it,
so a slow client slows the upstream down instead of filling the proxy's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from h2.config import H2Configuration
from h2.connection import ConnectionInputs, ConnectionState, H2ConnectionStateMachine
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes, Settings

from ...systemroots import verifying_context
from . import answers
from .connection import RelayConnection, UpstreamDecoder

if TYPE_CHECKING:
    from ..limits import Limits
    from ..target import Target
    from .flush import Flusher

log = logging.getLogger("tokenrelay.proxy")


Headers = list[tuple[bytes, bytes]]


class UpstreamStream(Protocol):
    """What an upstream connection tells the stream it carries."""

    def on_response(self, headers: Headers, ended: bool) -> None: ...

    def on_data(self, data: bytes, flow: int, ended: bool) -> None: ...

    def on_trailers(self, headers: Headers) -> None: ...

    def on_end(self) -> None: ...

    def on_reset(self, code: int) -> None: ...

    def on_lost(self, message: str, unprocessed: bool) -> None: ...

    def pump_up(self) -> None: ...


def _stays(state: ConnectionState) -> frozenset[int]:
    """The inputs that leave an open connection as it is with nothing to do (every frame but GOAWAY),
    read from h2's own table, by identity: an Enum hashes in Python, and h2 looks up about ten per
    gRPC call."""
    return frozenset(
        id(input_)
        for (was, input_), (func, target) in H2ConnectionStateMachine._transitions.items()
        if was is state and target is state and func is None
    )


_CLIENT_OPEN, _SERVER_OPEN = ConnectionState.CLIENT_OPEN, ConnectionState.SERVER_OPEN
_CLIENT_STAYS, _SERVER_STAYS = _stays(_CLIENT_OPEN), _stays(_SERVER_OPEN)
_RECV_GOAWAY = ConnectionInputs.RECV_GOAWAY


class GoawayKeepsStreams(H2ConnectionStateMachine):
    """h2 takes a received GOAWAY for the end of the connection and then refuses every frame; RFC 9113
    §6.8 lets the streams up to its last_stream_id finish, so the connection stays open for them.
    An open connection's frames skip h2's table lookup (``_stays``)."""

    def process_input(self, input_: ConnectionInputs) -> list[Event]:
        state = self.state
        if state is _CLIENT_OPEN:
            if id(input_) in _CLIENT_STAYS:
                return []
        elif state is _SERVER_OPEN and id(input_) in _SERVER_STAYS:
            return []
        if input_ is _RECV_GOAWAY:
            return []
        return super().process_input(input_)


class H2Upstream(asyncio.Protocol):
    """One HTTP/2 connection to the upstream."""

    def __init__(self, pool: H2Pool) -> None:
        self.pool = pool
        self.flusher = pool.flusher
        self.max_streams = pool.limits.h2_upstream_streams
        # The client's headers were validated as they arrived (downstream.py); the upstream is the one
        # the operator named, and stream.py drops connection-specific fields from its answers itself.
        config = H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
        )
        self.h2 = RelayConnection(config, UpstreamDecoder)  # Huffman strings remembered: only the upstream's
        self.h2.state_machine = GoawayKeepsStreams()
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, UpstreamStream] = {}
        self.closed = False
        self.closing = False  # the upstream sent GOAWAY: no new streams
        self.paused = False  # our socket buffer towards the upstream is full
        self.idle_since = pool.clock()
        self.dirty = False
        self.answered = False  # any byte came from the upstream

    # -- for the streams -------------------------------------------------------------------------

    def usable(self) -> bool:
        limit = min(self.max_streams, self.h2.remote_settings.max_concurrent_streams)
        return not self.closed and not self.closing and len(self.streams) < limit

    def open(self, stream: UpstreamStream, headers: Headers, end: bool) -> int:
        sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(sid, headers, end_stream=end)
        self.streams[sid] = stream
        self.mark()
        return sid

    def forget(self, sid: int, reset: bool) -> None:
        """The stream is done with this connection; ``reset`` cancels it at the upstream."""
        if self.streams.pop(sid, None) is None:
            return
        if reset and not self.closed:
            with contextlib.suppress(ProtocolError):  # already closed at the upstream
                self.h2.reset_stream(sid, ErrorCodes.CANCEL)
            self.mark()
        if not self.streams:
            self.idle_since = self.pool.clock()
            if self.closing:
                self.close()

    def ack(self, sid: int, size: int) -> None:
        if size and not self.closed:
            self.h2.acknowledge_received_data(size, sid)
            self.mark()

    def mark(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.flusher.dirty.append(self)

    def flush(self) -> None:
        self.dirty = False
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def close(self, why: str = "the upstream connection closed") -> None:
        if not self.closed:
            self.closed = True
            self.pool.discard(self)
            if self.transport is not None:
                self.transport.close()
        self._lose_all(why, unprocessed=False)

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        h2 = self.h2
        window = self.pool.limits.h2_upstream_stream_window
        # initial_values, not attributes: h2 sends only these in its first SETTINGS
        h2.local_settings = Settings(
            client=True,
            initial_values={SettingCodes.ENABLE_PUSH: 0, SettingCodes.INITIAL_WINDOW_SIZE: window},
        )
        h2.initiate_connection()
        h2.increment_flow_control_window(self.max_streams * window - 65535)  # a window for every stream
        self.transport.write(h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        if not self.answered:
            self.answered = True
            if data.startswith(b"HTTP/1."):  # h2 would wait for the rest of a "frame" that never ends
                self.close("the upstream does not speak HTTP/2 (it answered in HTTP/1.x)")
                self.flusher.run()
                return
        try:
            events = self.h2.receive_data(data)
        except ProtocolError as exc:
            why = f"the upstream broke the HTTP/2 protocol: {answers.protocol_error(exc)}"
            log.warning("upstream failed", extra={"error": why, "protocol": "h2"})
            self.flush()
            self.close(why)
            self.flusher.run()
            return
        for event in events:
            self._handle(event)
        self.mark()
        self.flusher.run()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.discard(self)
        self._lose_all("the upstream closed the connection", unprocessed=False)
        self.flusher.run()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        for stream in list(self.streams.values()):
            stream.pump_up()
        self.flusher.run()

    # -- events --------------------------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        if isinstance(event, DataReceived):
            stream = self.streams.get(event.stream_id or 0)
            if stream is None:
                self.ack(event.stream_id or 0, event.flow_controlled_length or 0)
            else:
                stream.on_data(
                    event.data or b"", event.flow_controlled_length or 0, event.stream_ended is not None
                )
        elif isinstance(event, ResponseReceived):
            stream = self.streams.get(event.stream_id or 0)
            if stream is not None:
                stream.on_response(event.headers, event.stream_ended is not None)
        elif isinstance(event, TrailersReceived):
            stream = self.streams.get(event.stream_id or 0)
            if stream is not None:
                stream.on_trailers(event.headers)
        elif isinstance(event, StreamEnded):
            stream = self.streams.get(event.stream_id or 0)
            if stream is not None:
                stream.on_end()
        elif isinstance(event, WindowUpdated):
            if event.stream_id:
                stream = self.streams.get(event.stream_id)
                if stream is not None:
                    stream.pump_up()
            else:
                for stream in list(self.streams.values()):
                    stream.pump_up()
        elif isinstance(event, StreamReset):
            stream = self.streams.pop(event.stream_id or 0, None)
            if stream is not None:
                stream.on_reset(int(event.error_code or 0))
        elif isinstance(event, ConnectionTerminated):
            self._goaway(event)

    def _goaway(self, event: ConnectionTerminated) -> None:
        self.closing = True
        self.pool.discard(self)
        last = event.last_stream_id or 0
        for sid in [sid for sid in self.streams if sid > last]:
            self.streams.pop(sid).on_lost("the upstream refused the stream (GOAWAY)", unprocessed=True)
        if event.error_code or not self.streams:
            self.close()

    def _lose_all(self, message: str, *, unprocessed: bool) -> None:
        streams = list(self.streams.values())
        self.streams.clear()
        for stream in streams:
            stream.on_lost(message, unprocessed)


class H2Pool:
    """The HTTP/2 connections to the one upstream."""

    def __init__(
        self,
        upstream: Target,
        ca_file: str | None,
        limits: Limits,
        flusher: Flusher,
        clock: Callable[[], float],
    ) -> None:
        self.upstream = upstream
        self.flusher = flusher
        self.clock = clock
        self.limits = limits
        self._timeout = limits.upstream_timeout
        self._ssl: ssl.SSLContext | None = None
        if upstream.ssl is not None:
            self._ssl = verifying_context("h2", ca_file)
        self._conns: list[H2Upstream] = []
        self._connecting: asyncio.Future[H2Upstream] | None = None
        self._closed = False

    def take(self) -> H2Upstream | None:
        """A connection with room for one more stream, or None."""
        for conn in reversed(self._conns):
            if conn.usable():
                return conn
        return None

    async def get(self) -> H2Upstream:
        """A connection with room for a stream, opened if need be; raises OSError or TimeoutError."""
        while True:
            conn = self.take()
            if conn is not None:
                return conn
            if self._connecting is None:
                self._connecting = asyncio.ensure_future(self._connect())
                # every waiter may have gone (clients reset their streams): the failure is still seen
                self._connecting.add_done_callback(lambda task: task.cancelled() or task.exception())
            await asyncio.shield(self._connecting)

    async def _connect(self) -> H2Upstream:
        upstream = self.upstream
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._timeout):
                transport, conn = await loop.create_connection(
                    lambda: H2Upstream(self),
                    upstream.host,
                    upstream.port,
                    ssl=self._ssl,
                    server_hostname=upstream.host if self._ssl else None,
                )
            if self._ssl is not None:
                alpn = cast(ssl.SSLObject, transport.get_extra_info("ssl_object")).selected_alpn_protocol()
                if alpn != "h2":
                    conn.close()
                    raise ConnectionError(
                        f"the upstream does not speak HTTP/2 over TLS (ALPN chose {alpn or 'nothing'})"
                    )
            if self._closed:
                conn.close()
                raise ConnectionError("the proxy is stopping")
            self._conns.append(conn)
            return conn
        finally:
            self._connecting = None

    def discard(self, conn: H2Upstream) -> None:
        if conn in self._conns:
            self._conns.remove(conn)

    def sweep(self, now: float) -> None:
        for conn in list(self._conns):
            if not conn.streams and now - conn.idle_since > self.limits.upstream_idle_timeout:
                conn.close()

    def close(self) -> None:
        self._closed = True
        for conn in list(self._conns):
            conn.close()
        self._conns.clear()
