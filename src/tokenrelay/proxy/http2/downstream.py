"""A client connection speaking cleartext HTTP/2 (prior knowledge): gRPC and other HTTP/2 clients.

http1/downstream.py hands the transport over when a connection's first bytes are the HTTP/2 client preface.
Every stream is relayed to the one upstream (stream.py) with the current token; ``:authority``
and ``:scheme`` are the upstream's, whatever the client sent; methods.py decides which methods
are refused (as on HTTP/1.1), target.py which ``:path`` is.

The limits of a server facing the internet, all in ``Limits`` (h2_* and header_*): streams at once,
the header list's size (HPACK bombs end at the decoder), a header block's time to finish
(``header_timeout``); per second, control frames, and streams reset by the client (rapid reset,
CVE-2023-44487), counted per client peer across its connections as they arrive (resets.py): beyond
either, GOAWAY ENHANCE_YOUR_CALM. A stream goes upstream only once the read that opened it is taken
whole: one the client reset in the same read never reaches the upstream.
While the client does not read its answers, the proxy stops reading from it, so the replies to its
control frames cannot pile up either.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

from h2.exceptions import ProtocolError

from .. import methods, refusals
from ..headers import H2_REQUEST_DROP
from ..policy import acquire
from ..refusals import Refusal
from . import answers
from . import frames as f
from .answers import Headers
from .headercoding import REQUEST_FLAGS, TRAILER_FLAGS, BlockMemo, ValidationMemo
from .relay import H2Relay
from .resets import peer_of
from .session import Session, SessionError, StreamGone
from .stream import Stream

if TYPE_CHECKING:
    from ..context import ProxyContext

log = logging.getLogger("tokenrelay.proxy")


def take_over(context: ProxyContext, transport: asyncio.Transport, data: bytes) -> None:
    """Serve ``transport``, whose first bytes ``data`` began with the HTTP/2 client preface."""
    relay = context.upstreams.side(H2Relay)
    conn = H2Client(context, relay)
    transport.set_protocol(conn)
    conn.connection_made(transport)
    context.connections.add(conn)
    if relay.resets.exhausted(conn.peer):
        conn.refuse_peer()
        return
    conn.data_received(data)


class H2Client(asyncio.Protocol):
    """Serves one HTTP/2 client connection: what its Session reads, relayed (``session.Peer``)."""

    def __init__(self, context: ProxyContext, relay: H2Relay) -> None:
        self.context = context
        self.relay = relay
        limits = self.limits = context.limits
        self.clock = context.clock  # the proxy's: its sweeps and the streams' timeouts read the same time
        # Headers are validated once, as they arrive (from the client here, from the upstream there);
        # here by h2's own rules, once per distinct list (ValidationMemo), as each request is handled.
        self.valid = ValidationMemo()
        self.session = Session(
            self,
            client=False,
            settings={
                f.MAX_CONCURRENT_STREAMS: limits.h2_max_streams,
                f.INITIAL_WINDOW_SIZE: limits.h2_stream_window,
                f.MAX_HEADER_LIST_SIZE: limits.header_bytes,
            },
            decoder=BlockMemo(),
            max_block=limits.header_bytes,
            connection_window=limits.h2_connection_window,
            clock=self.clock,
        )
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, Stream] = {}
        self.closed = False
        self.paused = False  # the client does not read: its socket buffer is full
        self.draining = False  # GOAWAY sent: finish the streams in flight, refuse new ones
        self.last_sid = 0
        self.idle_since = self.clock()
        self.data_frames = 0  # DATA frames sent since the last sweep that a WINDOW_UPDATE may answer
        self.windowless: dict[int, Stream] = {}  # streams waiting for the client's window
        self.buffered = 0  # answer bytes queued in its streams, bounded by limits.h2_buffer_bytes
        self.peer = ""  # the client, as the reset budget knows it (resets.peer_of)
        self.unbound: list[Stream] = []  # streams opened in this read: sent upstream once it is taken
        self.dirty = False

    # -- asyncio.Protocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        self.peer = peer_of(transport)
        self.mark()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        session = self.session
        try:
            session.feed(data)
        except SessionError as exc:
            self.unbound.clear()  # cancelled with the connection
            if exc.code == f.ENHANCE_YOUR_CALM:
                self._calm(str(exc))
            else:
                log.info("HTTP/2 client broke the protocol", extra={"error": str(exc)})
                session.close(exc.code)
                self._close()
            self.relay.flusher.run()
            return
        if self._flooding():
            self.unbound.clear()
            self._calm("control frame flood")
        elif self.unbound:
            self._send_unbound()
        self.mark()
        self.relay.flusher.run()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.session.closed = True
        self.context.closed(self)
        # streams left open upstream by a client that goes away are resets too: reconnecting in a loop
        # with streams open is the same flood
        abandoned = sum(stream.up is not None for stream in self.streams.values())
        if abandoned:
            self.relay.resets.spend(self.peer, abandoned)
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

    # -- what the session reads (session.Peer) ---------------------------------------------------------

    def on_head(self, sid: int, headers: Headers, end: bool) -> None:
        self._valid(headers, trailers=False)
        self._request(sid, headers, end)

    def on_trailers(self, sid: int, headers: Headers) -> None:
        self._valid(headers, trailers=True)
        stream = self.streams.get(sid)
        if stream is not None:
            stream.client_trailers(headers)
            stream.client_end()

    def on_data(self, sid: int, data: bytes, flow: int, end: bool) -> None:
        stream = self.streams.get(sid)
        if stream is None:
            self.ack(sid, flow)
            return
        if end:
            stream.complete = True  # END_STREAM then rides on the last DATA frame upstream
        stream.client_data(data, flow)
        if end:
            stream.client_end()

    def on_reset(self, sid: int, code: int) -> None:
        stream = self.streams.get(sid)
        if stream is not None:
            stream.cancel()
            # judged as each reset arrives, not after the read: the frames after it are not read
            if not self.relay.resets.spend(self.peer):
                raise SessionError(f.ENHANCE_YOUR_CALM, "rapid reset")

    def on_malformed(self, sid: int, why: str) -> None:
        # a connection error: a stream error would let a client make the proxy reset streams upstream
        # at will, outside the reset budget ("MadeYouReset", CVE-2025-8671)
        raise SessionError(f.PROTOCOL_ERROR, why)

    def on_window(self, sid: int) -> None:
        if sid:
            stream = self.streams.get(sid)
            if stream is not None:
                stream.pump_down()
        elif self.windowless and not self._flooding():
            # only the streams waiting for window, and only while there is some: a flood of
            # WINDOW_UPDATEs must not walk every open stream each time
            session = self.session
            for stream in list(self.windowless.values()):
                if session.send_window <= 0:
                    break
                stream.pump_down()

    def on_goaway(self, last_sid: int, code: int) -> None:
        if code:
            self._close()
        else:  # the client opens no more streams; the ones in flight still get their answers
            self.draining = True
            self.last_sid = self.session.highest_in
            if not self.streams:
                self._close()

    # -- what the streams call ---------------------------------------------------------------------------

    def send_headers(self, sid: int, headers: Headers, end: bool) -> bool:
        """False when the client has closed the stream meanwhile."""
        try:
            self.session.send_headers(sid, headers, end)
        except StreamGone:
            return False
        self.mark()
        return True

    def ack(self, sid: int, size: int) -> None:
        if size and not self.closed:
            self.session.ack(sid, size)
            self.mark()

    def reset(self, sid: int, code: int) -> None:
        if not self.closed:
            self.session.reset(sid, code)
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
        self.session.controls = self.data_frames = 0
        if self.closed:
            return
        since = self.session.block_since
        if since is not None and now - since > self.limits.header_timeout:
            self._calm("header block unfinished")  # as HTTP/1.1 bounds a request head's time
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
        self.last_sid = self.session.highest_in
        self.session.goaway(f.NO_ERROR)
        self.flush()
        if not self.streams:
            self._close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- requests ------------------------------------------------------------------------------------------

    def _valid(self, headers: Headers, *, trailers: bool) -> None:
        try:
            self.valid.check(headers, TRAILER_FLAGS if trailers else REQUEST_FLAGS)
        except ProtocolError as exc:  # h2's validation: its message may quote a value, scrubbed here
            raise SessionError(f.PROTOCOL_ERROR, answers.protocol_error(exc)) from None

    def _request(self, sid: int, headers: Headers, ended: bool) -> None:
        if self.draining and sid > self.last_sid:
            self.reset(sid, f.REFUSED_STREAM)
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
        self.unbound.append(stream)

    def _send_unbound(self) -> None:
        """The streams the read opened and left open go upstream, now that it is taken whole."""
        unbound, self.unbound = self.unbound, []
        bearer = self.context.bearer
        take = self.relay.pool.take
        for stream in unbound:
            if stream.done:
                continue
            held = bearer.current()
            up = take() if held is not None else None
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
        data = self.session.take()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def _flooding(self) -> bool:
        """More control frames since the last sweep than allowed; a client may send up to two
        WINDOW_UPDATEs (stream and connection) for each DATA frame it got, on top."""
        return self.session.controls > self.limits.h2_control_frames + 2 * self.data_frames

    def refuse_peer(self) -> None:
        """A new connection of a client whose reset budget is spent: GOAWAY before any stream."""
        self._calm("rapid reset, on this client's connections lately")

    def _calm(self, what: str) -> None:
        log.warning("HTTP/2 client refused", extra={"error": what})
        self.session.close(f.ENHANCE_YOUR_CALM, what.encode())
        self.flush()
        self._close()

    def _close(self) -> None:
        if not self.closed and self.transport is not None:
            self.flush()
            self.closed = self.session.closed = True  # the frames still in this read are not served
            self.transport.close()
            self.context.closed(self)
