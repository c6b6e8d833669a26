"""One client connection: parses its requests and forwards each, in order, with the token.

The hot path (token held, an idle upstream connection in the pool) runs inside the parser's
callbacks with no task, no future and one write per read in each direction. Only the rare paths
(asking the token source, opening a connection, the 401 retry) run as a task.

A request's body is streamed as it arrives; while no upstream connection is bound yet it is held,
and reading stops once that holds more than ``Limits.pending_bytes``. Its first bytes are also kept
(policy.Replay) so that the request can be sent again: once, on a fresh token after a 401, or on a new
connection when a pooled one turns out to have been closed by the upstream while idle (idempotent
methods only).
Pipelined requests are parsed, queued (reading stops meanwhile) and answered in order.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from typing import cast

import httptools

from ...tokens.token import Token
from .. import headers, methods, refusals
from ..bearer import Held
from ..context import ProxyContext
from ..limits import Limits
from ..policy import Replay, acquire, may_heal
from ..refusals import Refusal
from . import answers
from .flow import PENDING_FULL, QUEUED, STOPPED, UPGRADING, UPSTREAM_FULL, ReadFlow
from .pool import UpstreamPool
from .upstream import UpstreamConnection

log = logging.getLogger("tokenrelay.proxy")

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 §3.4: an HTTP/2 client's first bytes


class Stage(enum.Enum):
    """Where a request stands on its way to the upstream (its answer's state is the upstream's ``Answer``)."""

    RECEIVING = "receiving"  # its head or its body is arriving
    RECEIVED = "received"  # received in full, not yet all handed to an upstream connection
    SENT = "sent"  # handed in full to an upstream connection: waiting for the answer's head since ``sent_at``


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


class ProxiedRequest:
    """One request and its answer."""

    __slots__ = (
        "body_received",
        "body_started",
        "chunked",
        "close_after",
        "conn",
        "expect_continue",
        "head_only",
        "http11",
        "idempotent",
        "keep_alive",
        "pending",
        "pending_size",
        "prefix",
        "refusal",
        "replay",
        "sent_at",
        "stage",
        "started",
        "status",
        "token",
        "upgrade",
    )

    def __init__(self, started: float, replay_limit: int) -> None:
        self.started = started
        self.prefix = b""  # request line and headers, without Authorization and the final CRLF
        self.refusal: bytes | None = None  # the proxy's own answer instead of forwarding
        self.head_only = False
        self.http11 = True
        self.idempotent = True
        self.keep_alive = True  # the client wants the connection kept
        self.close_after = False  # "Connection: close" went to the client
        self.chunked = False
        self.upgrade = False
        self.expect_continue = False
        self.stage = _RECEIVING
        self.pending: list[bytes] = []  # body bytes received but not yet sent upstream
        self.pending_size = 0
        self.replay = Replay(replay_limit)
        self.token: Token | None = None
        self.conn: UpstreamConnection | None = None
        self.status = 0  # the status the client got; 0 while nothing was sent
        self.sent_at = 0.0  # when it reached the stage SENT
        self.body_started = 0.0  # the head's end, moved on by the time the proxy paused reading
        self.body_received = 0


class ClientConnection(asyncio.Protocol):
    """Serves one client connection."""

    def __init__(self, context: ProxyContext) -> None:
        self._context = context
        self.pool = context.upstreams.side(UpstreamPool)
        self.limits: Limits = context.limits
        self._limits = context.limits
        self._clock = clock = context.clock
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._parsing: ProxiedRequest | None = None
        self._active: ProxiedRequest | None = None
        self._queue: deque[ProxiedRequest] = deque()
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_size = 0
        self._unparsed = 0
        self._phase = _HEAD
        self.head_started: float | None = None  # a request head is arriving, since then
        self.idle_since = clock()
        self._out: list[bytes] = []
        self._flow = ReadFlow(clock)
        self._writing_paused = False
        self._progress = (-1, 0.0)  # the upstream's progress count at the last sweep, and since when
        self._upgrading: ProxiedRequest | None = None
        self._held: list[bytes] = []  # what the client sent after an upgrade request, until its 101
        self._spliced: UpstreamConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._last = False  # the request in flight is the last: shutting down, or the client half-closed
        self._fresh = True  # no byte received yet: it may be an HTTP/2 client

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def stage(self) -> Stage | None:
        """Where the request being answered stands; None when none is."""
        return self._active.stage if self._active is not None else None

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        context = self._context
        if len(context.connections) >= self._limits.max_connections:
            self._phase = _CLOSED
            refusal = refusals.too_many_connections(self._limits.max_connections)
            self.transport.write(answers.render(refusal, close=True))
            self.transport.close()
            context.observer.request(503, 0.0)
            return
        context.connections.add(self)
        self._flow.attach(self.transport)

    def data_received(self, data: bytes) -> None:
        if self._spliced is not None:
            self._spliced.write(data)
            return
        if self._flow.reasons & STOPPED:
            return
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
                self.head_started = self._clock()
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
        self._flush()

    def _speak_h2(self, data: bytes) -> None:
        """The first bytes are the HTTP/2 client preface (RFC 9113 §3.4): http2/ serves the rest."""
        from ..http2.downstream import (
            take_over,  # h2 loads with the first HTTP/2 client, off the HTTP/1.1 path
        )

        assert self.transport is not None
        self._phase = _CLOSED
        self._context.connections.discard(self)
        take_over(self._context, self.transport, data)

    def eof_received(self) -> bool:
        self._last = True
        if self._phase is _CLOSED:
            return False  # lingering after a refusal: the client is done too
        # Half-closed after a whole request: still send the answer. Mid-request: it cannot complete.
        return self._active is not None and self._parsing is None and not self._queue

    def connection_lost(self, exc: Exception | None) -> None:
        self._phase = _CLOSED
        self._flow.detach()
        self._context.closed(self)
        if self._task is not None:
            self._task.cancel()
        if self._spliced is not None:
            self._spliced.close()
            self._spliced = None
        request = self._active
        if request is not None:
            self._active = None
            if request.conn is not None:
                request.conn.close()  # nobody is left to read the answer
            self._context.observer.request(request.status or 499, self._clock() - request.started)

    def pause_writing(self) -> None:
        self._writing_paused = True
        conn = self._spliced or (self._active.conn if self._active else None)
        if conn is not None:
            conn.pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        conn = self._spliced or (self._active.conn if self._active else None)
        if conn is not None:
            conn.resume_reading()

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._parsing = ProxiedRequest(self._clock(), self._limits.replay_bytes)
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
        request.body_started = self._clock()
        parser = self._parser
        method = parser.get_method()
        request.keep_alive = parser.should_keep_alive()
        request.http11 = parser.get_http_version() == "1.1"
        upstream = self._context.target
        refused = methods.refusal(method)  # the parser has refused non-tokens: a 405 here
        target = upstream.target(self._url) if refused is None else None
        if target is None:
            request.refusal = answers.render(refused or refusals.foreign_target(), close=True)
            request.stage = _RECEIVED
            self._enqueue(request)
            raise _StopParsing  # the refusal is queued, and closes the connection
        head = headers.request(self._headers)
        self._headers = []
        request.head_only = method == b"HEAD"
        request.idempotent = method in methods.IDEMPOTENT
        request.chunked = head.chunked
        request.expect_continue = head.expect_continue
        parts = [method, b" ", target, b" HTTP/1.1\r\n", upstream.host_header, head.lines]
        if head.chunked:
            parts.append(b"Transfer-Encoding: chunked\r\n")
        if head.upgrade and parser.should_upgrade():
            request.upgrade = True
            request.keep_alive = False  # after a refused upgrade the connection's state is unclear
            parts.append(b"Connection: Upgrade\r\nUpgrade: " + head.upgrade + b"\r\n")
            self._upgrading = request
        request.prefix = b"".join(parts)
        self._enqueue(request)

    def on_body(self, body: bytes) -> None:
        request = self._parsing
        assert request is not None
        request.body_received += len(body)
        self._forward(request, b"%x\r\n%b\r\n" % (len(body), body) if request.chunked else body)

    def on_message_complete(self) -> None:
        request = self._parsing
        assert request is not None
        self._parsing = None
        if self._phase is _BODY:
            self._phase = _HEAD
        if request.chunked:
            self._forward(request, b"0\r\n\r\n")
        if request.conn is not None:
            request.stage = _SENT
            request.sent_at = self._clock()
        else:
            request.stage = _RECEIVED

    # -- what the upstream connection calls ------------------------------------------------------

    # AnswerEvents: what the upstream connection of the active request reports (see upstream.py).

    def send(self, data: bytes) -> None:
        """Bytes of the answer for the client."""
        if self.transport is not None and self._phase is not _CLOSED:
            self.transport.write(data)

    def answer_head(self, status: int, close_delimited: bool) -> bool:
        request = self._active
        assert request is not None
        request.status = status
        if close_delimited:
            request.keep_alive = False
        return self.keeps_alive(request)

    def may_retry_unauthorized(self) -> bool:
        request = self._active
        assert request is not None
        token = request.token
        return self._phase is not _CLOSED and may_heal(request.replay, token, self._context.bearer)

    def answered(self, conn: UpstreamConnection, reusable: bool) -> None:
        request = self._release(conn, reusable)
        if request is not None:
            self._end(request)

    def unauthorized(self, conn: UpstreamConnection, reusable: bool) -> None:
        request = self._release(conn, reusable)
        if request is not None:
            self._resend(request, reject=True)

    def _release(self, conn: UpstreamConnection, reusable: bool) -> ProxiedRequest | None:
        """Give ``conn`` back to the pool; the active request it served, if it still is."""
        request = self._active
        if request is None or request.conn is not conn:
            self.pool.release(conn, False)
            return None
        # a request whose body was not read in full leaves the upstream mid-request: never reuse
        self.pool.release(conn, reusable and request.stage is not _RECEIVING)
        return request

    def keeps_alive(self, request: ProxiedRequest) -> bool:
        """Whether the connection stays open after this answer; decided as its head is written."""
        keep = request.keep_alive and request.stage is not _RECEIVING and not self._last
        request.close_after = not keep
        return keep

    def can_retry(self, request: ProxiedRequest) -> bool:
        return request.replay.possible() and self._phase is not _CLOSED

    def upstream_failed(self, conn: UpstreamConnection, message: str) -> None:
        request = self._active
        head_sent = conn.head_sent
        conn.close()
        if request is None or request.conn is not conn:
            return
        request.conn = None
        if head_sent:
            self._abort()
        elif conn.reused and not conn.received and self.can_retry(request) and request.idempotent:
            self._resend(request, reject=False)
        else:
            if conn.reused and not conn.received:
                message += "; the request was not sent again, as the upstream may have processed it"
            log.warning("upstream failed", extra={"error": message})
            self._fail(request, refusals.upstream_failed(message))

    def upstream_paused(self) -> None:
        self._flow.pause(UPSTREAM_FULL)

    def upstream_resumed(self) -> None:
        self._resume(UPSTREAM_FULL)

    def splice(self, conn: UpstreamConnection) -> asyncio.Transport:
        """The upgrade succeeded: from now on bytes pass untouched both ways."""
        assert self.transport is not None
        request = self._active
        self._spliced = conn
        self._phase = _SPLICED
        self._upgrading = None
        self._active = None
        if request is not None:
            self._context.observer.request(request.status, self._clock() - request.started)
        for data in request.pending if request is not None else ():
            conn.write(data)
        for data in self._held:
            conn.write(data)
        self._held = []
        self._resume(UPGRADING)
        return self.transport

    # -- what the server calls -------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        """Apply the timeouts; called about once a second."""
        limits = self._limits
        parsing = self._parsing
        if self._phase is _BODY and parsing is not None and not self._flow.reasons:
            allowed = limits.body_timeout + parsing.body_received / limits.body_min_rate
            if now - parsing.body_started > allowed:
                self._body_timed_out(parsing)
                return
        request = self._active
        if request is not None:
            conn = request.conn
            if conn is None:
                return
            if request.stage is _SENT and not conn.head_sent:
                if now - request.sent_at > limits.upstream_timeout:
                    self._upstream_timed_out(request, conn)
            elif (conn.head_sent or self._flow.reasons & UPSTREAM_FULL) and not self._writing_paused:
                # mid-answer, or the upstream not taking the request body: it must make progress
                if self._progress[0] != conn.progress:
                    self._progress = (conn.progress, now)
                elif now - self._progress[1] > limits.upstream_timeout:
                    self._upstream_timed_out(request, conn)
            else:
                self._progress = (-1, now)
            return
        if self._phase is _SPLICED or self._phase is _CLOSED:
            return
        head_started = self.head_started
        if head_started is not None:
            if now - head_started > limits.header_timeout:
                self._refuse(refusals.header_timeout(limits.header_timeout))
        elif self._parsing is None and now - self.idle_since > limits.idle_timeout:
            self._close()

    def _upstream_timed_out(self, request: ProxiedRequest, conn: UpstreamConnection) -> None:
        """504 when nothing was answered yet, else the client's connection is cut (a short body)."""
        request.conn = None
        conn.close()
        timeout = self._limits.upstream_timeout
        log.warning("upstream timed out", extra={"timeout": timeout})
        self._fail(request, refusals.upstream_timeout(timeout))

    def _body_timed_out(self, request: ProxiedRequest) -> None:
        """A request body too slow to finish (a slowloris on the body): 408, or a cut once answered."""
        limits = self._limits
        log.warning(
            "request body too slow",
            extra={"received": request.body_received, "timeout": limits.body_timeout},
        )
        self._flow.pause(STOPPED)
        conn = request.conn
        if conn is not None:
            request.conn = None
            conn.close()  # the upstream holds part of a body that will never be whole
        if request is not self._active:
            self._abort()
            return
        self._fail(request, refusals.body_timeout(limits.body_timeout, limits.body_min_rate))

    def shutdown(self) -> None:
        """Finish the request in flight, then close; close at once when idle."""
        self._last = True
        if self._active is None and self._phase is not _SPLICED:
            self._close()

    def abort(self) -> None:
        self._abort()

    # -- forwarding --------------------------------------------------------------------------------

    def _enqueue(self, request: ProxiedRequest) -> None:
        if self._active is None:
            self._activate(request)
        else:
            self._queue.append(request)
            self._flow.pause(QUEUED)

    def _activate(self, request: ProxiedRequest) -> None:
        self._active = request
        if request.refusal is not None:
            self._answer(request, request.refusal, close=True)
            return
        if request.expect_continue and request.stage is _RECEIVING:
            self.send(answers.CONTINUE)
        context = self._context
        held = context.bearer.current()
        if held is not None:
            conn = self.pool.take()
            if conn is not None:
                self._bind(request, conn, held)
                return
        self._task = asyncio.ensure_future(self._dispatch(request, held, reject=False, fresh=False))

    async def _dispatch(
        self, request: ProxiedRequest, held: Held | None, *, reject: bool, fresh: bool
    ) -> None:
        context = self._context
        pool = self.pool
        got = await acquire(
            context.bearer,
            context.target,
            self._limits.upstream_timeout,
            held=held,
            rejected=request.token if reject else None,
            take=None if fresh else pool.take,
            connect=pool.connect,
            protocol="http/1.1",
        )
        self._task = None
        if isinstance(got, Refusal):
            self._fail(request, got)
            return
        held, conn = got
        if request is not self._active or self._phase is _CLOSED:
            pool.release(conn, reusable=True)
            return
        self._bind(request, conn, held)
        self._flush()

    def _bind(self, request: ProxiedRequest, conn: UpstreamConnection, held: Held) -> None:
        request.token = held.token
        request.conn = conn
        self._progress = (-1, 0.0)
        conn.bind(
            self, self._limits, head_only=request.head_only, http11=request.http11, upgrade=request.upgrade
        )
        out = self._out
        out.append(request.prefix + held.line + b"\r\n")
        if request.pending:
            out += request.pending
            request.pending = []
            request.pending_size = 0
            self._resume(PENDING_FULL)
        if request.stage is _RECEIVED:
            request.stage = _SENT
            request.sent_at = self._clock()
        if self._writing_paused:
            conn.pause_reading()

    def _forward(self, request: ProxiedRequest, data: bytes) -> None:
        """Body bytes (already framed) for the upstream."""
        request.replay.keep(data)
        if request.conn is not None and request is self._active:
            self._out.append(data)
        else:
            request.pending.append(data)
            request.pending_size += len(data)
            if request.pending_size > self._limits.pending_bytes:
                self._flow.pause(PENDING_FULL)

    def _hold(self, data: bytes) -> None:
        """Keep what follows an upgrade request until the upstream agrees to switch (101).

        Sent any earlier, it would be read by an upstream that refused the upgrade as the next
        request on that connection: smuggled, and paired with whoever's request comes next.
        """
        if data:
            self._held.append(data)
        self._flow.pause(UPGRADING)

    def _flush(self) -> None:
        out = self._out
        if out:
            request = self._active
            conn = request.conn if request is not None else None
            if conn is not None and not conn.closed:
                conn.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()

    def _resend(self, request: ProxiedRequest, *, reject: bool) -> None:
        """Send the request again: after a 401 with a new token, or on a new connection."""
        request.conn = None
        if request.stage is _SENT:
            request.stage = _RECEIVED
        request.pending_size = request.replay.size
        request.pending = request.replay.take()
        self._context.observer.retry()
        self._task = asyncio.ensure_future(self._dispatch(request, None, reject=reject, fresh=not reject))

    # -- endings ------------------------------------------------------------------------------------

    def _end(self, request: ProxiedRequest) -> None:
        """The answer went out in full."""
        self._active = None
        self._context.observer.request(request.status, self._clock() - request.started)
        if request.close_after or request.stage is _RECEIVING or self._last:
            self._close()
            return
        self.idle_since = self._clock()
        if self._queue:
            following = self._queue.popleft()
            if not self._queue:
                self._resume(QUEUED)
            self._activate(following)
            self._flush()

    def _answer(self, request: ProxiedRequest, answer: bytes, *, close: bool) -> None:
        request.status = int(answer[9:12])
        request.close_after = close
        self.send(answer)
        self._end(request)

    def _fail(self, request: ProxiedRequest, refusal: Refusal) -> None:
        """Answer with the proxy's own error, or cut the connection when the answer had begun."""
        if request is not self._active or self._phase is _CLOSED:
            return
        if request.status:
            self._abort()
            return
        # An HTTP/1.0 client would need "Connection: keep-alive": closing is as good, on this rare path.
        close = not self.keeps_alive(request) or not request.http11
        self._answer(request, answers.render(refusal, close=close), close=close)

    def _stop_reading(self) -> None:
        self._flow.pause(STOPPED)
        self._upgrading = None

    def _refuse(self, refusal: Refusal) -> None:
        """Stop reading; answer ``refusal`` once the requests before are answered."""
        self._stop_reading()
        active = self._active
        if active is not None and active.stage is _RECEIVING:
            self._abort()  # its body was cut by the error: it can never be sent in full
            return
        request = ProxiedRequest(self._clock(), self._limits.replay_bytes)
        request.refusal = answers.render(refusal, close=True)
        request.stage = _RECEIVED
        self._parsing = None
        self._enqueue(request)

    def _too_large(self) -> str:
        return f"the request head is larger than {self._limits.header_bytes} bytes"

    def _resume(self, reason: int) -> None:
        paused = self._flow.resume(reason)
        parsing = self._parsing
        if paused and parsing is not None and self._phase is _BODY:
            parsing.body_started += paused  # the proxy's own pause is not the client's slowness

    def _close(self) -> None:
        transport = self.transport
        if self._phase is not _CLOSED and transport is not None:
            in_body = self._phase is _BODY
            self._phase = _CLOSED
            self._flow.detach()
            if (self._flow.reasons & STOPPED or in_body) and transport.can_write_eof():
                # The client may still be sending: closing on unread bytes would reset the
                # connection and lose the answer just written. Half-close, discard what comes, then close.
                self._flow.reasons |= STOPPED
                transport.write_eof()
                transport.resume_reading()
                asyncio.get_running_loop().call_later(self._limits.linger_timeout, transport.close)
            else:
                transport.close()
            self._context.closed(self)

    def _abort(self) -> None:
        if self.transport is not None:
            self._phase = _CLOSED
            self._flow.detach()
            self.transport.abort()
            self._context.closed(self)
