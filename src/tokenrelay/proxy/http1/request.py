"""One HTTP/1.1 request's lifecycle, from its parsed head to its answer's end: the policy (refused, or
its head made for the upstream, a token and an upstream connection), its body, its answer, its retry
and its upstream deadline.

The client connection (downstream.py) translates the wire: it parses, queues pipelined requests and
owns the client's transport and timeouts; it makes a ``Request`` per request head and hands it the
body. As HTTP/2's ``Stream``, a request is what the upstream connection reports to (``AnswerEvents``).

The hot path (token held, an idle upstream connection in the pool) runs inside the parser's
callbacks with no task, no future and one write per read in each direction. Only the rare paths
(asking the token source, opening a connection, the 401 retry) run as a task.

A request's body is streamed as it arrives; while no upstream connection is bound yet it is held
(the client connection stops reading once that holds more than ``Limits.pending_bytes``). Its first
bytes are also kept (policy.Replay) so that the request can be sent again: once, on a fresh token
after a 401, or on a new connection when a pooled one turns out to have been closed by the upstream
while idle (idempotent methods only).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import TYPE_CHECKING, Protocol

from ...tokens.token import Token
from .. import methods, refusals
from ..bearer import Held
from ..deadline import AWAITING_HEAD, Deadline
from ..headers import Head
from ..limits import Limits
from ..policy import Replay, acquire, may_heal
from ..refusals import Refusal
from . import answers
from .flow import PENDING_FULL, UPSTREAM_FULL, ReadFlow
from .upstream import UpstreamConnection

if TYPE_CHECKING:
    from ..context import ProxyContext

log = logging.getLogger("tokenrelay.proxy")


class Stage(enum.Enum):
    """Where a request stands on its way to the upstream (its answer's state is the upstream's ``Answer``)."""

    RECEIVING = "receiving"  # its head or its body is arriving
    RECEIVED = "received"  # received in full, not yet all handed to an upstream connection
    SENT = "sent"  # handed in full to an upstream connection: waiting for the answer's head


# A member read through its class costs ~85 ns, a module global ~10: the hot path uses these.
_RECEIVING, _RECEIVED, _SENT = tuple(Stage)


class Client(Protocol):
    """What a request needs of its client connection (downstream.ClientConnection)."""

    context: ProxyContext
    limits: Limits
    flow: ReadFlow
    writing_paused: bool
    last: bool  # the request being answered is the connection's last

    @property
    def closed(self) -> bool: ...

    def send(self, data: bytes) -> None: ...

    def ended(self, request: Request, now: float) -> None:
        """The answer went out in full at ``now``: the next request, or the close."""
        ...

    def resume(self, reason: int) -> None: ...

    def abort(self) -> None: ...

    def spliced(self, request: Request, conn: UpstreamConnection) -> asyncio.Transport: ...


class Request:
    """One request and its answer."""

    __slots__ = (
        "active",
        "body_received",
        "body_started",
        "chunked",
        "client",
        "close_after",
        "conn",
        "deadline",
        "expect_continue",
        "head_only",
        "http11",
        "idempotent",
        "keep_alive",
        "out",
        "pending",
        "pending_size",
        "prefix",
        "refusal",
        "replay",
        "stage",
        "started",
        "status",
        "task",
        "token",
        "upgrade",
    )

    def __init__(self, client: Client, started: float) -> None:
        self.client = client
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
        self.active = False  # the request being answered (the ones after it wait in the queue)
        self.out: list[bytes] = []  # bytes for the upstream, written once per read from the client
        self.pending: list[bytes] = []  # body bytes received but not yet sent upstream
        self.pending_size = 0
        self.replay = Replay(client.limits.replay_bytes)
        self.token: Token | None = None
        self.conn: UpstreamConnection | None = None
        self.task: asyncio.Task[None] | None = None
        self.status = 0  # the status the client got; 0 while nothing was sent
        self.deadline = Deadline()
        self.body_started = 0.0  # the head's end, moved on by the time the proxy paused reading
        self.body_received = 0

    # -- what the client connection calls -----------------------------------------------------------

    def admit(self, method: bytes, url: bytes, head: Head, upgradable: bool) -> bool:
        """Its head has arrived: whether it is forwarded (its upstream head made), else ``refusal`` is
        its answer. ``head``: the client's header lines as the upstream may see them (headers.py);
        ``upgradable``: the parser takes it for an upgrade request."""
        upstream = self.client.context.target
        refused = methods.refusal(method)  # the parser has refused non-tokens: a 405 here
        target = upstream.target(url) if refused is None else None
        if target is None:
            self.refusal = answers.render(refused or refusals.foreign_target(), close=True)
            self.stage = _RECEIVED
            return False
        self.head_only = method == b"HEAD"
        self.idempotent = method in methods.IDEMPOTENT
        self.chunked = head.chunked
        self.expect_continue = head.expect_continue
        parts = [method, b" ", target, b" HTTP/1.1\r\n", upstream.host_header, head.lines]
        if head.chunked:
            parts.append(b"Transfer-Encoding: chunked\r\n")
        if head.upgrade and upgradable:
            self.upgrade = True
            self.keep_alive = False  # after a refused upgrade the connection's state is unclear
            parts.append(b"Connection: Upgrade\r\nUpgrade: " + head.upgrade + b"\r\n")
        self.prefix = b"".join(parts)
        return True

    def start(self) -> None:
        """Its turn has come: answer the refusal, or send it with the token."""
        self.active = True
        client = self.client
        if self.refusal is not None:
            self._answer(self.refusal, close=True)
            return
        if self.expect_continue and self.stage is _RECEIVING:
            client.send(answers.CONTINUE)
        context = client.context
        held = context.bearer.current()
        if held is not None:
            conn = context.pool.take()
            if conn is not None:
                self._bind(conn, held)
                return
        self.task = asyncio.ensure_future(self._dispatch(held, reject=False, fresh=False))

    def forward(self, data: bytes) -> None:
        """Body bytes (already framed) for the upstream."""
        self.replay.keep(data)
        if self.conn is not None and self.active:
            self.out.append(data)
        else:
            self.pending.append(data)
            self.pending_size += len(data)
            if self.pending_size > self.client.limits.pending_bytes:
                self.client.flow.pause(PENDING_FULL)

    def received(self, now: float) -> None:
        """The request arrived in full (its chunked end already forwarded)."""
        if self.conn is not None:
            self.stage = _SENT
            self.deadline.start(now)
        else:
            self.stage = _RECEIVED

    def flush(self) -> None:
        """Write what the last read from the client gave, in one write."""
        out = self.out
        if out:
            conn = self.conn
            if conn is not None and not conn.closed:
                conn.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()

    def sweep(self, now: float) -> None:
        """Apply the upstream's deadline (deadline.py)."""
        conn = self.conn
        if conn is None:
            return
        client = self.client
        if self.stage is _SENT and not conn.head_sent:
            progress = AWAITING_HEAD
        elif (conn.head_sent or client.flow.reasons & UPSTREAM_FULL) and not client.writing_paused:
            progress = conn.progress  # mid-answer, or the upstream not taking the request body
        else:
            self.deadline.start(now)  # nothing is owed by the upstream (the client is not reading)
            return
        if self.deadline.overdue(progress, now, client.limits.upstream_timeout):
            self._upstream_timed_out(conn)

    def body_timed_out(self) -> None:
        """The client's body was too slow (the client connection stopped reading): 408, or a cut."""
        conn = self.conn
        if conn is not None:
            self.conn = None
            conn.close()  # the upstream holds part of a body that will never be whole
        if not self.active:
            self.client.abort()
            return
        limits = self.client.limits
        self.fail(refusals.body_timeout(limits.body_timeout, limits.body_min_rate))

    def cancel(self) -> None:
        """The client is gone: nobody is left to read the answer."""
        self.active = False
        if self.task is not None:
            self.task.cancel()
        if self.conn is not None:
            self.conn.close()
        self.client.context.observer.request(self.status or 499, self.client.context.clock() - self.started)

    def fail(self, refusal: Refusal) -> None:
        """Answer with the proxy's own error, or cut the connection when the answer had begun."""
        client = self.client
        if not self.active or client.closed:
            return
        if self.status:
            client.abort()
            return
        # An HTTP/1.0 client would need "Connection: keep-alive": closing is as good, on this rare path.
        close = not self.keeps_alive() or not self.http11
        self._answer(answers.render(refusal, close=close), close=close)

    def keeps_alive(self) -> bool:
        """Whether the connection stays open after this answer; decided as its head is written."""
        keep = self.keep_alive and self.stage is not _RECEIVING and not self.client.last
        self.close_after = not keep
        return keep

    # -- AnswerEvents: what the upstream connection reports (see upstream.py) ------------------------

    def send(self, data: bytes) -> None:
        """Bytes of the answer for the client."""
        self.client.send(data)

    def answer_head(self, status: int, close_delimited: bool) -> bool:
        self.status = status
        if close_delimited:
            self.keep_alive = False
        return self.keeps_alive()

    def may_retry_unauthorized(self) -> bool:
        return not self.client.closed and may_heal(self.replay, self.token, self.client.context.bearer)

    def answered(self, conn: UpstreamConnection, reusable: bool) -> None:
        if self._release(conn, reusable):
            self._end()

    def unauthorized(self, conn: UpstreamConnection, reusable: bool) -> None:
        if self._release(conn, reusable):
            self._resend(reject=True)

    def upstream_failed(self, conn: UpstreamConnection, message: str) -> None:
        head_sent = conn.head_sent
        conn.close()
        if not self.active or self.conn is not conn:
            return
        self.conn = None
        if head_sent:
            self.client.abort()
        elif conn.reused and not conn.received and self._can_retry() and self.idempotent:
            self._resend(reject=False)
        else:
            if conn.reused and not conn.received:
                message += "; the request was not sent again, as the upstream may have processed it"
            log.warning("upstream failed", extra={"error": message})
            self.fail(refusals.upstream_failed(message))

    def upstream_paused(self) -> None:
        self.client.flow.pause(UPSTREAM_FULL)

    def upstream_resumed(self) -> None:
        self.client.resume(UPSTREAM_FULL)

    def splice(self, conn: UpstreamConnection) -> asyncio.Transport:
        """The upgrade succeeded: from now on bytes pass untouched both ways."""
        self.active = False
        client = self.client
        client.context.observer.request(self.status, client.context.clock() - self.started)
        for data in self.pending:
            conn.write(data)
        self.pending = []
        return client.spliced(self, conn)

    # -- the rare paths -----------------------------------------------------------------------------

    async def _dispatch(self, held: Held | None, *, reject: bool, fresh: bool) -> None:
        client = self.client
        context = client.context
        pool = context.pool
        got = await acquire(
            context.bearer,
            context.target,
            client.limits.upstream_timeout,
            held=held,
            rejected=self.token if reject else None,
            take=None if fresh else pool.take,
            connect=pool.connect,
            protocol="http/1.1",
        )
        self.task = None
        if isinstance(got, Refusal):
            self.fail(got)
            return
        held, conn = got
        if not self.active or client.closed:
            pool.release(conn, reusable=True)
            return
        self._bind(conn, held)
        self.flush()

    def _bind(self, conn: UpstreamConnection, held: Held) -> None:
        client = self.client
        self.token = held.token
        self.conn = conn
        self.deadline.recount()
        conn.bind(self, client.limits, head_only=self.head_only, http11=self.http11, upgrade=self.upgrade)
        out = self.out
        out.append(self.prefix + held.line + b"\r\n")
        if self.pending:
            out += self.pending
            self.pending = []
            self.pending_size = 0
            client.resume(PENDING_FULL)
        if self.stage is _RECEIVED:
            self.stage = _SENT
            self.deadline.start(client.context.clock())
        if client.writing_paused:
            conn.pause_reading()

    def _release(self, conn: UpstreamConnection, reusable: bool) -> bool:
        """Give ``conn`` back to the pool; whether this request is still the one it served."""
        pool = self.client.context.pool
        if not self.active or self.conn is not conn:
            pool.release(conn, False)
            return False
        # a request whose body was not read in full leaves the upstream mid-request: never reuse
        pool.release(conn, reusable and self.stage is not _RECEIVING)
        return True

    def _can_retry(self) -> bool:
        return self.replay.possible() and not self.client.closed

    def _resend(self, *, reject: bool) -> None:
        """Send the request again: after a 401 with a new token, or on a new connection."""
        self.conn = None
        if self.stage is _SENT:
            self.stage = _RECEIVED
        self.pending_size = self.replay.size
        self.pending = self.replay.take()
        self.client.context.observer.retry()
        self.task = asyncio.ensure_future(self._dispatch(None, reject=reject, fresh=not reject))

    def _upstream_timed_out(self, conn: UpstreamConnection) -> None:
        """504 when nothing was answered yet, else the client's connection is cut (a short body)."""
        self.conn = None
        conn.close()
        timeout = self.client.limits.upstream_timeout
        log.warning("upstream timed out", extra={"timeout": timeout})
        self.fail(refusals.upstream_timeout(timeout))

    def _answer(self, answer: bytes, *, close: bool) -> None:
        self.status = int(answer[9:12])
        self.close_after = close
        self.client.send(answer)
        self._end()

    def _end(self) -> None:
        """The answer went out in full."""
        self.active = False
        client = self.client
        now = client.context.clock()
        client.context.observer.request(self.status, now - self.started)
        client.ended(self, now)
