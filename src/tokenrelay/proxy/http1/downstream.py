"""One client connection: the HTTP/1.1 wire. It parses requests, hands each to its ``Request``
(request.py: the policy, the upstream, the body, the answer) in order, and owns what belongs to the
connection: the client's transport and why reading from it is paused, the queue of pipelined
requests (parsed and queued while reading stops, answered in order), the limits on a request's head
and body, the idle timeout, a splice after a 101, and the hand-over of an HTTP/2 client.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from typing import cast

import httptools

from .. import headers, refusals
from ..context import ProxyContext
from ..limits import Limits
from ..refusals import Refusal
from . import answers
from .flow import QUEUED, STOPPED, UPGRADING, ReadFlow
from .request import Request, Stage
from .upstream import UpstreamConnection

__all__ = ["ClientConnection", "Phase", "Stage"]

log = logging.getLogger("tokenrelay.proxy")

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 §3.4: an HTTP/2 client's first bytes


class Phase(enum.Enum):
    """Where a client connection stands."""

    HEAD = "head"  # between requests, or a request head arriving
    BODY = "body"  # a request body arriving (the requests before it may still be answered)
    SPLICED = "spliced"  # after a 101: bytes pass untouched both ways
    CLOSED = "closed"  # closed, lingering after a refusal, or handed to the HTTP/2 side


# A member read through its class costs ~85 ns, a module global ~10: the hot path uses these.
_RECEIVING, _RECEIVED, _SENT = tuple(Stage)
_HEAD, _BODY, _SPLICED, _CLOSED = tuple(Phase)


class _StopParsing(Exception):
    """Raised inside a parser callback: nothing more is parsed (the refusal is already queued)."""


class _Refuse(Exception):
    """Raised inside a parser callback to stop parsing and answer ``refusal``."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__()
        self.refusal = refusal


class ClientConnection(asyncio.Protocol):
    """Serves one client connection."""

    def __init__(self, context: ProxyContext) -> None:
        self.context = context
        self.limits: Limits = context.limits
        self._limits = context.limits
        self._clock = clock = context.clock
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._parsing: Request | None = None
        self._active: Request | None = None
        self._queue: deque[Request] = deque()
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._last_head = headers.last_request()
        self._head_size = 0
        self._unparsed = 0
        self._phase = _HEAD
        self.head_started: float | None = None  # a request head is arriving, since then
        self.idle_since = clock()
        self._now = 0.0  # when the read being parsed arrived: one clock reading serves its callbacks
        self.flow = ReadFlow(clock)
        self.writing_paused = False
        self._upgrading: Request | None = None
        self._held: list[bytes] = []  # what the client sent after an upgrade request, until its 101
        self._spliced: UpstreamConnection | None = None
        self.last = False  # the request in flight is the last: shutting down, or the client half-closed
        self._fresh = True  # no byte received yet: it may be an HTTP/2 client

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def stage(self) -> Stage | None:
        """Where the request being answered stands; None when none is."""
        return self._active.stage if self._active is not None else None

    @property
    def closed(self) -> bool:
        return self._phase is _CLOSED

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        context = self.context
        if len(context.connections) >= self._limits.max_connections:
            self._phase = _CLOSED
            refusal = refusals.too_many_connections(self._limits.max_connections)
            self.transport.write(answers.render(refusal, close=True))
            self.transport.close()
            context.observer.request(503, 0.0)
            return
        context.connections.add(self)
        self.flow.attach(self.transport)

    def data_received(self, data: bytes) -> None:
        if self._spliced is not None:
            self._spliced.write(data)
            return
        if self.flow.reasons & STOPPED:
            return
        self._now = now = self._clock()
        upgrading = self._upgrading
        if upgrading is not None and upgrading.stage is not _RECEIVING:
            self._hold(data)
            return
        if self._phase is not _BODY:
            self._unparsed += len(data)
            if self.head_started is None:
                if self._fresh and data[:4] == b"PRI " and H2_PREFACE.startswith(data[:24]):
                    self._speak_h2(data)
                    return
                self._fresh = False
                self.head_started = now
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            if self._upgrading is not None:
                self._hold(data[exc.args[0] :])
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, _Refuse):
                self._refuse(cause.refusal)
            elif isinstance(cause, _StopParsing):
                self._stop_reading()
            else:
                raise
        except httptools.HttpParserError as exc:
            self._refuse(refusals.bad_request(f"malformed request: {exc}"))
        else:
            if self._phase is not _BODY and self._unparsed > self._limits.header_bytes:
                self._refuse(refusals.headers_too_large(self._too_large()))
        active = self._active
        if active is not None:
            active.flush()

    def _speak_h2(self, data: bytes) -> None:
        """The first bytes are the HTTP/2 client preface (RFC 9113 §3.4): http2/ serves the rest."""
        from ..http2.downstream import (
            take_over,  # h2 loads with the first HTTP/2 client, off the HTTP/1.1 path
        )

        assert self.transport is not None
        self._phase = _CLOSED
        self.context.connections.discard(self)
        take_over(self.context, self.transport, data)

    def eof_received(self) -> bool:
        self.last = True
        if self._phase is _CLOSED:
            return False  # lingering after a refusal: the client is done too
        # Half-closed after a whole request: still send the answer. Mid-request: it cannot complete.
        return self._active is not None and self._parsing is None and not self._queue

    def connection_lost(self, exc: Exception | None) -> None:
        self._phase = _CLOSED
        self.flow.detach()
        self.context.closed(self)
        if self._spliced is not None:
            self._spliced.close()
            self._spliced = None
        request = self._active
        if request is not None:
            self._active = None
            request.cancel()

    def pause_writing(self) -> None:
        self.writing_paused = True
        conn = self._spliced or (self._active.conn if self._active else None)
        if conn is not None:
            conn.pause_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        conn = self._spliced or (self._active.conn if self._active else None)
        if conn is not None:
            conn.resume_reading()

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._parsing = Request(self, self._now)
        self._url = b""
        self._headers = []
        self._head_size = 0

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_size += len(url)
        self._unparsed = 0
        if self._head_size > self._limits.header_bytes:
            raise _Refuse(refusals.headers_too_large(self._too_large()))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._head_size += len(name) + len(value) + 4
        self._unparsed = 0
        if self._head_size > self._limits.header_bytes:
            raise _Refuse(refusals.headers_too_large(self._too_large()))
        if len(self._headers) > self._limits.header_count:
            raise _Refuse(refusals.too_many_headers(self._limits.header_count))

    def on_headers_complete(self) -> None:
        request = self._parsing
        assert request is not None
        if self._phase is _HEAD:
            self._phase = _BODY
        self._unparsed = 0
        self.head_started = None
        request.body_started = self._now
        parser = self._parser
        request.keep_alive = parser.should_keep_alive()
        request.http11 = parser.get_http_version() == "1.1"
        head = self._last_head.filter(self._headers)
        self._headers = []
        if not request.admit(parser.get_method(), self._url, head, parser.should_upgrade()):
            self._enqueue(request)
            raise _StopParsing  # the refusal is queued, and closes the connection
        if request.upgrade:
            self._upgrading = request
        self._enqueue(request)

    def on_body(self, body: bytes) -> None:
        request = self._parsing
        assert request is not None
        request.body_received += len(body)
        request.forward(b"%x\r\n%b\r\n" % (len(body), body) if request.chunked else body)

    def on_message_complete(self) -> None:
        request = self._parsing
        assert request is not None
        self._parsing = None
        if self._phase is _BODY:
            self._phase = _HEAD
        if request.chunked:
            request.forward(b"0\r\n\r\n")
        request.received(self._now)

    # -- what the request calls --------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Bytes of the answer for the client."""
        if self.transport is not None and self._phase is not _CLOSED:
            self.transport.write(data)

    def ended(self, request: Request, now: float) -> None:
        """``request``'s answer went out in full, at ``now``."""
        self._active = None
        if request.close_after or request.stage is _RECEIVING or self.last:
            self._close()
            return
        self.idle_since = now
        if self._queue:
            following = self._queue.popleft()
            if not self._queue:
                self.resume(QUEUED)
            self._active = following
            following.start()
            following.flush()

    def spliced(self, request: Request, conn: UpstreamConnection) -> asyncio.Transport:
        """``request``'s upgrade succeeded: from now on bytes pass untouched both ways."""
        assert self.transport is not None
        self._spliced = conn
        self._phase = _SPLICED
        self._upgrading = None
        self._active = None
        for data in self._held:
            conn.write(data)
        self._held = []
        self.resume(UPGRADING)
        return self.transport

    def resume(self, reason: int) -> None:
        paused = self.flow.resume(reason)
        parsing = self._parsing
        if paused and parsing is not None and self._phase is _BODY:
            parsing.body_started += paused  # the proxy's own pause is not the client's slowness

    def abort(self) -> None:
        if self.transport is not None:
            self._phase = _CLOSED
            self.flow.detach()
            self.transport.abort()
            self.context.closed(self)

    # -- what the server calls -------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        """Apply the timeouts; called about once a second."""
        limits = self._limits
        parsing = self._parsing
        if self._phase is _BODY and parsing is not None and not self.flow.reasons:
            allowed = limits.body_timeout + parsing.body_received / limits.body_min_rate
            if now - parsing.body_started > allowed:
                self._body_timed_out(parsing)
                return
        request = self._active
        if request is not None:
            request.sweep(now)
            return
        if self._phase is _SPLICED or self._phase is _CLOSED:
            return
        head_started = self.head_started
        if head_started is not None:
            if now - head_started > limits.header_timeout:
                self._refuse(refusals.header_timeout(limits.header_timeout))
        elif self._parsing is None and now - self.idle_since > limits.idle_timeout:
            self._close()

    def _body_timed_out(self, request: Request) -> None:
        """A request body too slow to finish (a slowloris on the body): 408, or a cut once answered."""
        log.warning(
            "request body too slow",
            extra={"received": request.body_received, "timeout": self._limits.body_timeout},
        )
        self.flow.pause(STOPPED)
        request.body_timed_out()

    def shutdown(self) -> None:
        """Finish the request in flight, then close; close at once when idle."""
        self.last = True
        if self._active is None and self._phase is not _SPLICED:
            self._close()

    # -- the queue -----------------------------------------------------------------------------------

    def _enqueue(self, request: Request) -> None:
        if self._active is None:
            self._active = request
            request.start()
        else:
            self._queue.append(request)
            self.flow.pause(QUEUED)

    def _hold(self, data: bytes) -> None:
        """Keep what follows an upgrade request until the upstream agrees to switch (101).

        Sent any earlier, it would be read by an upstream that refused the upgrade as the next
        request on that connection: smuggled, and paired with whoever's request comes next.
        """
        if data:
            self._held.append(data)
        self.flow.pause(UPGRADING)

    # -- endings ------------------------------------------------------------------------------------

    def _stop_reading(self) -> None:
        self.flow.pause(STOPPED)
        self._upgrading = None

    def _refuse(self, refusal: Refusal) -> None:
        """Stop reading; answer ``refusal`` once the requests before are answered."""
        self._stop_reading()
        active = self._active
        if active is not None and active.stage is _RECEIVING:
            self.abort()  # its body was cut by the error: it can never be sent in full
            return
        request = Request(self, self._clock())
        request.refusal = answers.render(refusal, close=True)
        request.stage = _RECEIVED
        self._parsing = None
        self._enqueue(request)

    def _too_large(self) -> str:
        return f"the request head is larger than {self._limits.header_bytes} bytes"

    def _close(self) -> None:
        transport = self.transport
        if self._phase is not _CLOSED and transport is not None:
            in_body = self._phase is _BODY
            self._phase = _CLOSED
            self.flow.detach()
            if (self.flow.reasons & STOPPED or in_body) and transport.can_write_eof():
                # The client may still be sending: closing on unread bytes would reset the
                # connection and lose the answer just written. Half-close, discard what comes, then close.
                self.flow.reasons |= STOPPED
                transport.write_eof()
                transport.resume_reading()
                asyncio.get_running_loop().call_later(self._limits.linger_timeout, transport.close)
            else:
                transport.close()
            self.context.closed(self)
