"""A client connection speaking cleartext HTTP/2 (prior knowledge): gRPC and other HTTP/2 clients.

http1/downstream.py hands the transport over when a connection's first bytes are the HTTP/2 client preface.
Every stream is relayed to the one upstream (stream.py) with the current token; ``:authority``
and ``:scheme`` are the upstream's, whatever the client sent; methods.py decides which methods
are refused (as on HTTP/1.1), target.py which ``:path`` is.

The limits of a server facing the internet, all in ``Limits`` (h2_* and header_*): streams at once,
the header list's size (HPACK bombs end at the decoder); per second, control frames and streams
reset by the client (rapid reset, CVE-2023-44487): beyond either, GOAWAY ENHANCE_YOUR_CALM.
While the client does not read its answers, the proxy stops reading from it, so the replies to its
control frames cannot pile up either.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

from h2.config import H2Configuration
from h2.connection import ConnectionState
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    PingAckReceived,
    PingReceived,
    PriorityUpdated,
    RemoteSettingsChanged,
    RequestReceived,
    SettingsAcknowledged,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    UnknownFrameReceived,
    WindowUpdated,
)
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes, Settings
from hyperframe.frame import GoAwayFrame

from .. import methods, refusals
from ..headers import H2_REQUEST_DROP
from ..policy import acquire
from ..refusals import Refusal
from . import answers
from .answers import Headers
from .connection import REQUEST_FLAGS, TRAILER_FLAGS, RelayConnection, ValidationMemo
from .relay import H2Relay
from .stream import Stream
from .upstream import GoawayKeepsStreams

if TYPE_CHECKING:
    from ..context import ProxyContext

log = logging.getLogger("tokenrelay.proxy")


# Frames that carry no request: a client sending thousands of them is flooding (CVE-2019-9512, -9515).
_CONTROL = (
    PingReceived,
    PingAckReceived,
    RemoteSettingsChanged,
    SettingsAcknowledged,
    PriorityUpdated,
    UnknownFrameReceived,
)


def take_over(context: ProxyContext, transport: asyncio.Transport, data: bytes) -> None:
    """Serve ``transport``, whose first bytes ``data`` began with the HTTP/2 client preface."""
    relay = context.h2
    if not isinstance(relay, H2Relay):
        relay = context.h2 = H2Relay(context)
    conn = H2Client(context, relay)
    transport.set_protocol(conn)
    conn.connection_made(transport)
    context.connections.add(conn)
    conn.data_received(data)


class H2Client(asyncio.Protocol):
    """Serves one HTTP/2 client connection."""

    def __init__(self, context: ProxyContext, relay: H2Relay) -> None:
        self.context = context
        self.relay = relay
        self.limits = context.limits
        self.clock = context.clock  # the proxy's: its sweeps and the streams' timeouts read the same time
        # Headers are validated once, as they arrive (from the client here, from the upstream there);
        # here by h2's own rules, once per distinct list (ValidationMemo), as each request is handled.
        config = H2Configuration(
            client_side=False,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
        )
        self.valid = ValidationMemo()
        h2 = self.h2 = RelayConnection(config)
        h2.state_machine = GoawayKeepsStreams()
        h2.local_settings = Settings(
            client=False,
            initial_values={
                SettingCodes.MAX_CONCURRENT_STREAMS: self.limits.h2_max_streams,
                SettingCodes.INITIAL_WINDOW_SIZE: self.limits.h2_stream_window,
                SettingCodes.MAX_HEADER_LIST_SIZE: self.limits.header_bytes,
            },
        )
        # h2 applies the setting once the client acknowledges it; an HPACK bomb may come before
        h2.decoder.max_header_list_size = self.limits.header_bytes
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, Stream] = {}
        self.closed = False
        self.paused = False  # the client does not read: its socket buffer is full
        self.draining = False  # GOAWAY sent: finish the streams in flight, refuse new ones
        self.last_sid = 0
        self.idle_since = self.clock()
        self.frames = 0  # control frames and WINDOW_UPDATEs since the last sweep
        self.data_frames = 0  # DATA frames sent since the last sweep that a WINDOW_UPDATE may answer
        self.windowless: dict[int, Stream] = {}  # streams waiting for the client's window
        self.buffered = 0  # answer bytes queued in its streams, bounded by limits.h2_buffer_bytes
        self.resets = 0  # streams the client reset since the last sweep
        self.dirty = False

    # -- asyncio.Protocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(self.limits.h2_connection_window - 65535)
        self.mark()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            events = self.h2.receive_data(data)
            for event in events:
                if isinstance(event, RequestReceived | TrailersReceived):
                    trailers = isinstance(event, TrailersReceived)
                    self.valid.check(event.headers, TRAILER_FLAGS if trailers else REQUEST_FLAGS)
                self._handle(event)
        except ProtocolError as exc:
            log.info("HTTP/2 client broke the protocol", extra={"error": answers.protocol_error(exc)})
            if self.h2.state_machine.state is not ConnectionState.CLOSED:  # a header list h2 refuses
                self.h2.close_connection(ErrorCodes.PROTOCOL_ERROR)
            self.flush()  # h2 has queued the GOAWAY
            self._close()
            self.relay.flusher.run()
            return
        flood = self._flooding()
        if flood or self.resets > self.limits.h2_resets:
            self._calm("control frame flood" if flood else "rapid reset")
        elif self.h2.unfinished_block() > self.limits.header_bytes:
            self._calm("header block larger than the header list limit")  # HEADERS + CONTINUATIONs
        self.mark()
        self.relay.flusher.run()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.context.closed(self)
        for stream in list(self.streams.values()):
            stream.cancel()
        self.relay.flusher.run()

    def pause_writing(self) -> None:
        self.paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()
        for stream in list(self.streams.values()):
            stream.pump_down()
        self.relay.flusher.run()

    # -- what the streams call ---------------------------------------------------------------------------

    def send_headers(self, sid: int, headers: Headers, end: bool) -> bool:
        """False when the client has closed the stream meanwhile."""
        try:
            self.h2.send_headers(sid, headers, end_stream=end)
        except ProtocolError:
            return False
        self.mark()
        return True

    def ack(self, sid: int, size: int) -> None:
        if size and not self.closed:
            self.h2.acknowledge_received_data(size, sid)
            self.mark()

    def reset(self, sid: int, code: int) -> None:
        if not self.closed:
            try:
                self.h2.reset_stream(sid, code)
            except ProtocolError:
                return  # already closed
            self.mark()

    def stream_done(self, stream: Stream, code: int) -> None:
        self.streams.pop(stream.sid, None)
        if stream.windowless:
            del self.windowless[stream.sid]
        grpc_status = stream.grpc_status
        if grpc_status is None and stream.grpc and code == 499:
            grpc_status = 1  # CANCELLED: the client went away
        self.context.observer.stream(code, grpc_status, self.clock() - stream.started)
        if not self.streams:
            self.idle_since = self.clock()
            if self.draining:
                self._close()

    async def dispatch(self, stream: Stream, *, reject: bool) -> None:
        """The slow path: wait for a token or an upstream connection, then send the stream on."""
        relay = self.relay
        bearer = self.context.bearer
        rejected = stream.token if reject else None
        got = await acquire(
            bearer,
            self.context.target,
            self.limits.upstream_timeout,
            held=None if rejected else bearer.current(),
            rejected=rejected,
            take=relay.pool.take,
            connect=relay.pool.get,
            protocol="h2",
        )
        stream.task = None
        if isinstance(got, Refusal):
            stream.refuse(got)
        elif not stream.done:
            held, up = got
            stream.bind(up, held)
        relay.flusher.run()

    # -- what the server calls ----------------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        self.frames = self.resets = self.data_frames = 0
        if self.closed:
            return
        timeout = self.limits.upstream_timeout
        for stream in list(self.streams.values()):
            stream.sweep(now, timeout)
        if not self.streams and now - self.idle_since > self.limits.idle_timeout:
            self.shutdown()
        self.relay.flusher.run()

    def shutdown(self) -> None:
        """GOAWAY: the streams in flight finish, new ones are refused; close once none is left."""
        if self.closed or self.draining:
            return
        self.draining = True
        self.last_sid = self.h2.highest_inbound_stream_id
        # h2.close_connection would also stop the streams in flight from sending anything more
        goaway = GoAwayFrame(0)
        goaway.last_stream_id = self.last_sid
        goaway.error_code = ErrorCodes.NO_ERROR
        self.flush()
        assert self.transport is not None
        self.transport.write(goaway.serialize())
        if not self.streams:
            self._close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- frames --------------------------------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        if isinstance(event, DataReceived):
            sid = event.stream_id or 0
            stream = self.streams.get(sid)
            data = event.data or b""
            if not data and event.stream_ended is None:
                self.frames += 1
            if stream is None:
                self.ack(sid, event.flow_controlled_length or 0)
            else:
                if event.stream_ended is not None:
                    stream.complete = True  # END_STREAM then rides on the last DATA frame upstream
                stream.client_data(data, event.flow_controlled_length or 0)
        elif isinstance(event, RequestReceived):
            self._request(event.stream_id or 0, event.headers, event.stream_ended is not None)
        elif isinstance(event, StreamEnded):
            stream = self.streams.get(event.stream_id or 0)
            if stream is not None:
                stream.client_end()
        elif isinstance(event, WindowUpdated):
            self.frames += 1
            if event.stream_id:
                stream = self.streams.get(event.stream_id)
                if stream is not None:
                    stream.pump_down()
            elif self.windowless and not self._flooding():
                # only the streams waiting for window, and only while there is some: a flood of
                # WINDOW_UPDATEs must not walk every open stream each time
                h2 = self.h2
                for stream in list(self.windowless.values()):
                    if h2.outbound_flow_control_window <= 0:
                        break
                    stream.pump_down()
        elif isinstance(event, TrailersReceived):
            stream = self.streams.get(event.stream_id or 0)
            if stream is not None:
                stream.client_trailers(event.headers)
        elif isinstance(event, StreamReset):
            stream = self.streams.get(event.stream_id or 0)
            if stream is not None:
                self.resets += 1
                stream.cancel()
        elif isinstance(event, _CONTROL):
            self.frames += 1
        elif isinstance(event, ConnectionTerminated):
            if event.error_code:
                self._close()
            else:  # the client opens no more streams; the ones in flight still get their answers
                self.draining = True
                self.last_sid = self.h2.highest_inbound_stream_id
                if not self.streams:
                    self._close()

    def _request(self, sid: int, headers: Headers, ended: bool) -> None:
        if self.draining and sid > self.last_sid:
            self.reset(sid, ErrorCodes.REFUSED_STREAM)
            return
        method = path = content_type = b""
        kept: Headers = []
        for name, value in headers:
            if name[:1] == b":":
                if name == b":method":
                    method = value
                elif name == b":path":
                    path = value
                continue  # :authority and :scheme are the upstream's; :protocol comes only with CONNECT
            if name in H2_REQUEST_DROP or name[:6] == b"proxy-":
                if name == b"te" and value.lower() == b"trailers":
                    kept.append((name, b"trailers"))
                continue
            if name == b"content-type":
                content_type = value
            kept.append((name, value))
        stream = Stream(self, sid, answers.is_grpc(content_type))
        stream.complete = ended
        self.streams[sid] = stream
        refused = methods.refusal(method)
        if refused is not None:
            stream.refuse(refused)
            return
        relay = self.relay
        target = relay.target.origin(path)
        if target is None:
            stream.refuse(refusals.bad_path())
            return
        if len(kept) > self.limits.header_count:
            stream.refuse(refusals.too_many_headers(self.limits.header_count))
            return
        stream.headers = [
            (b":method", method),
            (b":scheme", relay.scheme),
            (b":authority", relay.authority),
            (b":path", target),
            *kept,
        ]
        held = self.context.bearer.current()
        up = relay.pool.take() if held is not None else None
        if held is not None and up is not None:
            stream.bind(up, held)
        else:
            stream.task = asyncio.ensure_future(self.dispatch(stream, reject=False))

    # -- writing and closing -------------------------------------------------------------------------------

    def mark(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.relay.flusher.dirty.append(self)

    def flush(self) -> None:
        self.dirty = False
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def _flooding(self) -> bool:
        """More control frames since the last sweep than allowed; a client may send up to two
        WINDOW_UPDATEs (stream and connection) for each DATA frame it got, on top."""
        return self.frames > self.limits.h2_control_frames + 2 * self.data_frames

    def _calm(self, what: str) -> None:
        log.warning("HTTP/2 client refused", extra={"error": what})
        self.h2.close_connection(ErrorCodes.ENHANCE_YOUR_CALM, what.encode())
        self.flush()
        self._close()

    def _close(self) -> None:
        if not self.closed and self.transport is not None:
            self.flush()
            self.closed = True
            self.transport.close()
            self.context.closed(self)
