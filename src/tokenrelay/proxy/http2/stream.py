"""One HTTP/2 stream relayed from a client to the upstream, with the token, and its answer back.

Each direction keeps a queue of DATA not yet sent on: bytes wait there while the receiving side's
flow-control window is closed, and the sending side's window is reopened (the bytes acknowledged)
only once they have gone on. Memory per stream is thereby bounded by the windows the proxy grants.

The request body's first bytes are kept (policy.Replay) so that the request can be sent again:
once, with a refreshed token, when the upstream answers 401 or a trailers-only ``grpc-status: 16``
before anything went to the client (policy.may_heal, as on HTTP/1.1); or when the upstream refused
the stream unprocessed (GOAWAY, REFUSED_STREAM).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Protocol

from ...tokens.token import Token
from .. import refusals
from ..headers import h2_answer, h2_trailers
from ..policy import Replay, may_heal
from . import answers
from . import frames as f
from .answers import Headers
from .session import StreamGone

if TYPE_CHECKING:
    from ..bearer import Bearer, Held
    from ..limits import Limits
    from ..observer import ProxyObserver
    from ..refusals import Refusal
    from .session import Session


class _Context(Protocol):
    observer: ProxyObserver
    bearer: Bearer


class DownSide(Protocol):
    """What a stream uses of its client connection (``downstream.H2Client``)."""

    @property
    def session(self) -> Session: ...

    paused: bool
    closed: bool
    clock: Callable[[], float]
    limits: Limits
    buffered: int  # bytes in the to_down queues of all its streams
    windowless: dict[int, Stream]  # streams with answer bytes waiting for the client's window
    data_frames: int  # DATA frames that earn the client WINDOW_UPDATEs, since the last sweep

    @property
    def context(self) -> _Context: ...

    def send_headers(self, sid: int, headers: Headers, end: bool) -> bool: ...

    def ack(self, sid: int, size: int) -> None: ...

    def reset(self, sid: int, code: int) -> None: ...

    def mark(self) -> None: ...

    def stream_done(self, stream: Stream, code: int) -> None: ...

    def dispatch(self, stream: Stream, *, reject: bool) -> Coroutine[object, object, None]: ...


class UpSide(Protocol):
    """What a stream uses of the upstream connection it is sent on (``upstream.H2Upstream``)."""

    @property
    def session(self) -> Session: ...

    paused: bool
    closed: bool

    def open(self, stream: Stream, headers: Headers, end: bool) -> int: ...

    def forget(self, sid: int, reset: bool) -> None: ...

    def ack(self, sid: int, size: int) -> None: ...

    def mark(self) -> None: ...


log = logging.getLogger("tokenrelay.proxy")

UNAUTHENTICATED = 16


class Stream:
    """A client's stream and the upstream stream it is relayed on."""

    __slots__ = (
        "complete",
        "done",
        "down",
        "down_end",
        "down_trailers",
        "grpc",
        "grpc_status",
        "headers",
        "replay",
        "sid",
        "stall",
        "started",
        "status",
        "task",
        "to_down",
        "to_up",
        "token",
        "up",
        "up_ended",
        "up_sid",
        "up_trailers",
        "waiting_since",
        "windowless",
    )

    def __init__(self, down: DownSide, sid: int, grpc: bool) -> None:
        self.down = down
        self.sid = sid
        self.grpc = grpc
        self.started = down.clock()
        self.headers: Headers = []  # for the upstream, without Authorization
        self.up: UpSide | None = None
        self.up_sid = 0
        self.complete = False  # the client ended its side
        self.to_up: deque[tuple[bytes, bool]] = deque()  # (bytes, acknowledge to the client once sent)
        self.up_trailers: Headers | None = None
        self.up_ended = False  # END_STREAM went upstream
        self.replay = Replay(down.limits.replay_bytes)
        self.token: Token | None = None
        self.task: asyncio.Future[None] | None = None
        self.status = 0  # the HTTP status the client got; 0 while nothing was sent
        self.grpc_status: int | None = None
        self.to_down: deque[bytes] = deque()
        self.down_trailers: Headers | None = None
        self.down_end = False  # the answer ended; END_STREAM goes once to_down is empty
        self.done = False
        self.waiting_since = 0.0  # sent in full, waiting for the answer's head
        self.windowless = False  # in down.windowless
        self.stall: tuple[bytes, float] | None = None  # to_down's head at a sweep, and since when

    # -- from the client ---------------------------------------------------------------------------

    def client_data(self, data: bytes, flow: int) -> None:
        if flow > len(data):
            self.down.ack(self.sid, flow - len(data))  # padding: nothing to pass on
        if not data:
            return
        self.replay.keep(data)
        self.to_up.append((data, True))
        self.pump_up()

    def client_trailers(self, headers: Headers) -> None:
        self.up_trailers = h2_trailers(headers)

    def client_end(self) -> None:
        self.complete = True
        self.pump_up()

    def cancel(self) -> None:
        """The client reset the stream, or went away."""
        if self.done:
            return
        self.done = True
        if self.task is not None:
            self.task.cancel()
            self.task = None
        self._discard_down()
        self._drop_up(reset=True)
        self.down.stream_done(self, self.status or 499)

    # -- towards the upstream -----------------------------------------------------------------------

    def bind(self, up: UpSide, held: Held) -> None:
        self.token = held.token
        self.up = up
        end = self.complete and not self.to_up and self.up_trailers is None
        self.up_sid = up.open(self, [*self.headers, (b"authorization", held.value)], end)
        if end:
            self.up_ended = True
            self.waiting_since = self.down.clock()
        else:
            self.pump_up()

    def pump_up(self) -> None:
        up = self.up
        if up is None or up.paused or up.closed or self.up_ended:
            return
        session = up.session
        sid = self.up_sid
        to_up = self.to_up
        try:
            while to_up:
                room = session.room(sid)
                if room <= 0:
                    break
                data, ack = to_up[0]
                if len(data) > room:
                    to_up[0] = (data[room:], ack)
                    data = data[:room]
                else:
                    to_up.popleft()
                last = not to_up and self.complete and self.up_trailers is None
                session.send_data(sid, data, last)
                if ack:
                    self.down.ack(self.sid, len(data))
                if last:
                    self.up_ended = True
                    if not self.status:
                        self.waiting_since = self.down.clock()
            if not to_up and self.complete and not self.up_ended:
                if self.up_trailers is not None:
                    session.send_headers(sid, self.up_trailers, True)
                else:
                    session.end_stream(sid)
                self.up_ended = True
                if not self.status:
                    self.waiting_since = self.down.clock()
        except StreamGone:
            # the upstream closed its stream: what the client still sends has nowhere to go
            self.up_ended = True
            self._ack_unsent()
        up.mark()

    # -- from the upstream ----------------------------------------------------------------------------

    def on_response(self, headers: Headers, ended: bool) -> None:
        self.waiting_since = 0.0
        status = 0
        for name, value in headers:
            if name == b":status":
                status = int(value)
                break
        if (
            status == 401 or (ended and answers.grpc_status(headers) == UNAUTHENTICATED)
        ) and self._may_heal():
            self._drop_up(reset=not ended)
            token = self.token
            log.info(
                "upstream refused the token; retrying with a refreshed one",
                extra={"fingerprint": token.fingerprint if token else None, "protocol": "h2"},
            )
            self._resend(reject=True)
            return
        self.status = status
        self.replay.forget()  # the answer has begun
        if ended:
            self.grpc_status = answers.grpc_status(headers)
        if not self.down.send_headers(self.sid, h2_answer(headers), ended):
            self.cancel()
        elif ended:
            self._finish()

    def on_data(self, data: bytes, flow: int, ended: bool) -> None:
        if flow > len(data) and self.up is not None:
            self.up.ack(self.up_sid, flow - len(data))
        if data:
            down = self.down
            self.to_down.append(data)
            down.buffered += len(data)
            self.down_end = ended  # END_STREAM then rides on the last DATA frame to the client
            self.pump_down()
            if down.buffered > down.limits.h2_buffer_bytes and not self.done:
                log.warning(
                    "HTTP/2 client leaves too much unread; resetting a stream",
                    extra={"buffered": down.buffered, "limit": down.limits.h2_buffer_bytes},
                )
                self._reset_down(f.ENHANCE_YOUR_CALM)

    def on_trailers(self, headers: Headers) -> None:
        self.grpc_status = answers.grpc_status(headers)
        self.down_trailers = h2_answer(headers)

    def on_end(self) -> None:
        if self.done or not self.status or self.down_end:
            return
        self.down_end = True
        self.pump_down()

    def on_reset(self, code: int) -> None:
        """The upstream reset the stream (the connection has already forgotten it)."""
        self._discard_down()  # what the upstream sent counts against its connection's window
        self.up = None
        if self.done:
            return
        if code == f.REFUSED_STREAM and not self.status and self._may_resend():
            self._resend(reject=False)
            return
        self._reset_down(code)

    def on_lost(self, message: str, unprocessed: bool) -> None:
        """The upstream connection went away, or refused the stream unprocessed."""
        self.up = None
        if self.done:
            return
        if unprocessed and not self.status and self._may_resend():
            self._resend(reject=False)
        elif not self.status:
            log.warning("upstream failed", extra={"error": message, "protocol": "h2"})
            self.refuse(refusals.upstream_failed(message))
        else:
            self._reset_down(f.INTERNAL_ERROR)

    def on_malformed(self, message: str) -> None:
        """The upstream's answer is malformed (the upstream connection has reset and forgotten the
        stream): what it sent of it is dropped, its window handed back to the shared connection."""
        self._discard_down()
        self.on_lost(message, unprocessed=False)

    # -- towards the client -----------------------------------------------------------------------------

    def pump_down(self) -> None:
        down = self.down
        if down.paused or self.done:
            return
        session = down.session
        sid = self.sid
        to_down = self.to_down
        worthy = down.limits.h2_update_worthy_bytes
        try:
            while to_down:
                room = session.room(sid)
                if room <= 0:
                    if not self.windowless:
                        self.windowless = True
                        down.windowless[sid] = self
                    break
                data = to_down[0]
                if len(data) > room:
                    to_down[0] = data[room:]
                    data = data[:room]
                else:
                    to_down.popleft()
                last = not to_down and self.down_end and self.down_trailers is None
                session.send_data(sid, data, last)
                down.buffered -= len(data)
                if len(data) >= worthy or not to_down:
                    down.data_frames += 1
                if self.up is not None:
                    self.up.ack(self.up_sid, len(data))
                if last:
                    self._finish()
                    down.mark()  # the frame just sent: nothing else may flush this client soon
                    return
            if self.windowless and not to_down:
                self.windowless = False
                del down.windowless[sid]
            if not to_down and self.down_end:
                if self.down_trailers is not None:
                    session.send_headers(sid, self.down_trailers, True)
                else:
                    session.end_stream(sid)
                self._finish()
        except StreamGone:
            self.cancel()  # the client closed the stream
            return
        down.mark()

    def refuse(self, refusal: Refusal) -> None:
        """The proxy's own answer (a refusal or an upstream failure), or a reset once the answer began."""
        if self.done:
            return
        if self.status:
            self._reset_down(f.INTERNAL_ERROR)
            return
        answer = answers.render(refusal, self.grpc)
        self.status = answer.status
        self.grpc_status = answer.grpc_status
        if not self.down.send_headers(self.sid, answer.headers, not answer.body):
            self.cancel()
        elif answer.body:
            self.to_down.append(answer.body)
            self.down.buffered += len(answer.body)
            self.down_end = True
            self.pump_down()
        else:
            self._finish()

    def sweep(self, now: float, timeout: float) -> None:
        if not self.complete and not self.status and not self.to_up and self._body_late(now):
            self._body_timed_out()
            return
        if self.waiting_since and not self.status and now - self.waiting_since > timeout:
            self.waiting_since = 0.0
            self._drop_up(reset=True)
            log.warning("upstream timed out", extra={"timeout": timeout, "protocol": "h2"})
            self.refuse(refusals.upstream_timeout(timeout))
            return
        # Answer bytes the client takes none of (window closed, socket full): the queue's head stays
        # the same object until some of it is sent, so the hot path keeps no time for this.
        to_down = self.to_down
        if not to_down:
            self.stall = None
        elif self.stall is None or self.stall[0] is not to_down[0]:
            self.stall = (to_down[0], now)
        elif now - self.stall[1] > timeout:
            log.warning("HTTP/2 client read none of its answer", extra={"timeout": timeout})
            self._reset_down(f.CANCEL)

    # -- helpers ----------------------------------------------------------------------------------------

    def _body_late(self, now: float) -> bool:
        """The request body, still coming, is later than HTTP/1.1's would be: body_timeout from the
        head, plus a second for every body_min_rate bytes. Judged only before the answer's head and
        while the upstream has taken all the client sent (else the wait is the upstream's): once the
        upstream answers, a slow request is a bidirectional call's own pace. Nor while the client's
        connection window is all but spent: other streams' bytes, waiting for the upstream, hold it."""
        session = self.down.session
        received = session.received(self.sid)
        if received is None or session.recv_window < f.DEFAULT_FRAME_SIZE:
            return False
        limits = self.down.limits
        return now - self.started > limits.body_timeout + received / limits.body_min_rate

    def _body_timed_out(self) -> None:
        """A request body too slow to finish (a slowloris on HTTP/2): the stream is reset at the upstream,
        and the client gets 408 BODY_TIMEOUT (gRPC: DEADLINE_EXCEEDED), then RST_STREAM."""
        limits = self.down.limits
        log.warning(
            "request body too slow",
            extra={"timeout": limits.body_timeout, "min_rate": limits.body_min_rate, "protocol": "h2"},
        )
        if self.task is not None:
            self.task.cancel()
            self.task = None
        self._drop_up(reset=True)
        self.up_ended = True  # nothing more goes upstream
        self._ack_unsent()
        self.refuse(refusals.body_timeout(limits.body_timeout, limits.body_min_rate))

    def _may_resend(self) -> bool:
        return self.replay.possible() and not self.down.closed

    def _may_heal(self) -> bool:
        """Whether a refused token may be refreshed and the call sent again (a whole request only)."""
        down = self.down
        return self.complete and not down.closed and may_heal(self.replay, self.token, down.context.bearer)

    def _resend(self, *, reject: bool) -> None:
        body = self.replay.take()
        self._ack_unsent()
        self.to_up = deque((data, False) for data in body)
        self.up_ended = False
        self.waiting_since = 0.0
        self.down.context.observer.retry()
        self.task = asyncio.ensure_future(self.down.dispatch(self, reject=reject))

    def _discard_down(self) -> None:
        """Drop the answer bytes not sent to the client, and hand their window back to the upstream
        connection: it counts them against every stream it carries."""
        to_down = self.to_down
        if to_down:
            size = sum(map(len, to_down))
            to_down.clear()
            self.stall = None
            self.down.buffered -= size
            if self.up is not None:
                self.up.ack(self.up_sid, size)

    def _ack_unsent(self) -> None:
        """Give the client back the window of body bytes that will never be sent on."""
        size = sum(len(data) for data, ack in self.to_up if ack)
        self.to_up.clear()
        self.down.ack(self.sid, size)

    def _drop_up(self, *, reset: bool) -> None:
        up = self.up
        if up is not None:
            self.up = None
            up.forget(self.up_sid, reset)

    def _reset_down(self, code: int) -> None:
        self.down.reset(self.sid, code)
        self.cancel()

    def _finish(self) -> None:
        """The answer went out in full."""
        self.done = True
        self._drop_up(reset=not self.up_ended)
        if not self.complete:  # RFC 9113 §8.1: the rest of the request is not needed
            self.down.reset(self.sid, f.NO_ERROR)
        self.down.stream_done(self, self.status)
