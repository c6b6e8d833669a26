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
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from h2.exceptions import ProtocolError

from ...systemroots import verifying_context
from ..headers import h2_answer
from . import answers
from . import frames as f
from .headercoding import ANSWER_FLAGS, ANSWER_TRAILER_FLAGS, UpstreamDecoder, ValidationMemo
from .session import Session, SessionError

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

    def on_malformed(self, message: str) -> None: ...

    def pump_up(self) -> None: ...


class H2Upstream(asyncio.Protocol):
    """One HTTP/2 connection to the upstream: what its Session reads, told to the streams it carries."""

    def __init__(self, pool: H2Pool) -> None:
        self.pool = pool
        self.flusher = pool.flusher
        limits = pool.limits
        self.max_streams = limits.h2_upstream_streams
        # The client's headers were validated as they arrived (downstream.py); the upstream is the one
        # the operator named, and stream.py drops connection-specific fields from its answers itself.
        self.session = Session(
            self,
            client=True,
            settings={f.ENABLE_PUSH: 0, f.INITIAL_WINDOW_SIZE: limits.h2_upstream_stream_window},
            decoder=UpstreamDecoder(limits.header_bytes),  # Huffman strings remembered: only the upstream's
            max_block=limits.header_bytes,
            connection_window=self.max_streams * limits.h2_upstream_stream_window,  # one for every stream
            clock=pool.clock,  # block_since, judged by the pool's sweep on the proxy's clock
        )
        self.valid = ValidationMemo()  # §8.1.1: a malformed answer is not passed on
        self.header_count = limits.header_count
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
        session = self.session
        limit = min(self.max_streams, session.remote_max_streams)
        return not self.closed and not self.closing and len(self.streams) < limit and session.can_open

    def open(self, stream: UpstreamStream, headers: Headers, end: bool) -> int:
        sid = self.session.open(headers, end)
        self.streams[sid] = stream
        self.mark()
        return sid

    def forget(self, sid: int, reset: bool) -> None:
        """The stream is done with this connection; ``reset`` cancels it at the upstream."""
        if self.streams.pop(sid, None) is None:
            return
        if not self.closed and (reset or sid in self.session.streams):
            # a stream the upstream answered in full before the request went (a 401 to heal) is still
            # open on our side: left so, it would count against the upstream's concurrent streams
            self.session.reset(sid, f.CANCEL if reset else f.NO_ERROR)  # nothing, if already closed
            self.mark()
        if not self.streams:
            self.idle_since = self.pool.clock()
            if self.closing:
                self.close()

    def ack(self, sid: int, size: int) -> None:
        if size and not self.closed:
            self.session.ack(sid, size)
            self.mark()

    def mark(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.flusher.dirty.append(self)

    def flush(self) -> None:
        self.dirty = False
        data = self.session.take()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def close(self, why: str = "the upstream connection closed") -> None:
        if not self.closed:
            self.closed = True
            self.session.closed = True
            self.pool.discard(self)
            if self.transport is not None:
                self.transport.close()
        self._lose_all(why, unprocessed=False)

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        self.transport.write(self.session.take())  # the preface, SETTINGS, the connection's window

    def data_received(self, data: bytes) -> None:
        if not self.answered:
            self.answered = True
            if data.startswith(b"HTTP/1."):  # it would be read as the head of a "frame" that never ends
                self.close("the upstream does not speak HTTP/2 (it answered in HTTP/1.x)")
                self.flusher.run()
                return
        try:
            self.session.feed(data)
        except SessionError as exc:
            why = f"the upstream broke the HTTP/2 protocol: {exc}"
            log.warning("upstream failed", extra={"error": why, "protocol": "h2"})
            self.session.close(exc.code)
            self.flush()
            self.close(why)
            self.flusher.run()
            return
        if self.session.asks > self.pool.limits.h2_control_frames:
            # Not ``controls``, as for a client: frames in flight on streams we reset count there,
            # and a false alarm here would end every client's streams on the connection.
            self.calm("PING or SETTINGS flood")
            return
        self.mark()
        self.flusher.run()

    def connection_lost(self, exc: Exception | None) -> None:
        self.close("the upstream closed the connection")
        self.flusher.run()

    def calm(self, why: str) -> None:
        """End the connection for an upstream that holds it up: GOAWAY ENHANCE_YOUR_CALM."""
        why = f"the upstream broke the proxy's limits: {why}"
        log.warning("upstream failed", extra={"error": why, "protocol": "h2"})
        self.session.close(f.ENHANCE_YOUR_CALM)
        self.flush()
        self.close(why)
        self.flusher.run()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        for stream in list(self.streams.values()):
            stream.pump_up()
        self.flusher.run()

    # -- what the session reads (session.Peer) -------------------------------------------------------

    def on_head(self, sid: int, headers: Headers, end: bool) -> None:
        stream = self.streams.get(sid)
        if stream is not None and self._valid(sid, stream, headers, trailers=False):
            stream.on_response(headers, end)
            if end:
                stream.on_end()

    def on_trailers(self, sid: int, headers: Headers) -> None:
        stream = self.streams.get(sid)
        if stream is not None and self._valid(sid, stream, headers, trailers=True):
            stream.on_trailers(headers)
            stream.on_end()

    def on_data(self, sid: int, data: bytes, flow: int, end: bool) -> None:
        stream = self.streams.get(sid)
        if stream is None:
            self.ack(sid, flow)
            return
        stream.on_data(data, flow, end)
        if end:
            stream.on_end()

    def on_reset(self, sid: int, code: int) -> None:
        stream = self.streams.pop(sid, None)
        if stream is not None:
            stream.on_reset(code)

    def on_window(self, sid: int) -> None:
        if sid:
            stream = self.streams.get(sid)
            if stream is not None:
                stream.pump_up()
        else:
            for stream in list(self.streams.values()):
                stream.pump_up()

    def on_goaway(self, last_sid: int, code: int) -> None:
        """RFC 9113 §6.8: the streams up to ``last_sid`` may finish; the others were never processed."""
        self.closing = True
        self.pool.discard(self)
        for sid in self.session.forget_above(last_sid):
            stream = self.streams.pop(sid, None)
            if stream is not None:
                stream.on_lost("the upstream refused the stream (GOAWAY)", unprocessed=True)
        if code or not self.streams:
            self.close()

    def on_malformed(self, sid: int, why: str) -> None:
        """A malformed answer (RFC 9113 §8.1.1) is a stream error: reset at the upstream (by the session),
        and the client gets the proxy's 502 (or a reset, once its answer began); the other
        streams on the connection go on."""
        stream = self.streams.pop(sid, None)
        if stream is None:
            return
        why = f"the upstream sent a malformed answer: {why}"
        log.warning("upstream failed", extra={"error": why, "protocol": "h2"})
        stream.on_malformed(why)

    def _valid(self, sid: int, stream: UpstreamStream, headers: Headers, *, trailers: bool) -> bool:
        why = self._malformed(headers, trailers)
        if why is None:
            return True
        self.on_malformed(sid, why)
        self.session.reset(sid, f.PROTOCOL_ERROR, ended=True)
        return False

    def _malformed(self, headers: Headers, trailers: bool) -> str | None:
        """What makes an answer's header list malformed, or too long (as on HTTP/1.1), if anything."""
        if len(headers) > self.header_count + (not trailers):  # a head's :status is no header field
            return f"more than {self.header_count} header fields"
        flags = ANSWER_TRAILER_FLAGS if trailers else ANSWER_FLAGS
        try:
            try:
                self.valid.check(headers, flags)
            except ProtocolError:
                # connection-specific fields make an answer malformed too (§8.2.2), but the proxy drops
                # them as it does from HTTP/1.1 answers (headers.h2_answer): judged without them
                self.valid.check(h2_answer(headers), flags)
        except ProtocolError as exc:  # h2's message may quote a value: scrubbed
            return answers.protocol_error(exc)
        if not trailers:
            status = headers[0][1]  # validated: an answer's one pseudo-header field leads
            if len(status) != 3 or not status.isdigit():  # RFC 9110 §15: three digits (h2 checks none)
                return "a :status that is not three digits"
        return None

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
            conn.session.asks = 0  # a second's worth
            since = conn.session.block_since
            if since is not None and now - since > self.limits.header_timeout:
                # a block in progress stops every other frame, so every client's streams on it
                conn.calm("header block unfinished")
            elif not conn.streams and now - conn.idle_since > self.limits.upstream_idle_timeout:
                conn.close()

    def close(self) -> None:
        self._closed = True
        for conn in list(self._conns):
            conn.close()
        self._conns.clear()
