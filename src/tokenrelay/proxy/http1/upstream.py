"""One keep-alive connection to the upstream: sends a request's bytes, relays the answer to the client.

The answer is parsed with httptools only as far as the proxy needs: the status, the header lines
(rewritten once, hop-by-hop ones dropped) and the body's framing. Body bytes go to the client as they
arrive, in one write per read; while the client's socket buffer is full the proxy stops reading from
the upstream (back-pressure). After a ``101 Switching Protocols`` both connections are spliced and
bytes flow untouched both ways.

Dependencies run one way: this module knows nothing of the client side or of the pool. It reports
what happens to the answer through ``AnswerEvents``, which each request implements (request.py,
which decides about retries and pooling), and tells its ``Owner`` (the pool) when it dies idle.
"""

from __future__ import annotations

import asyncio
import enum
import mmap
from typing import Protocol, cast

import httptools

from .. import headers
from ..limits import Limits

_STATUS_LINES: dict[tuple[int, bytes], bytes] = {}
_NO_BODY_STATUSES = frozenset({204, 304})


def status_line(status: int, reason: bytes) -> bytes:
    line = _STATUS_LINES.get((status, reason))
    if line is None:
        line = b"HTTP/1.1 %d %s\r\n" % (status, reason)
        if len(_STATUS_LINES) < 256:
            _STATUS_LINES[status, reason] = line
    return line


class Answer(enum.Enum):
    """Where the answer on a connection stands."""

    IDLE = "idle"  # no request bound (pooled, or just opened)
    HEAD = "head"  # waiting for the answer's head, or reading it
    INTERIM = "interim"  # inside a 1xx answer, which the proxy swallows
    BODY = "body"  # the head went to the client; relaying the body
    DISCARDING = "discarding"  # a 401 that will be retried: read to its end, not for the client
    DISCARDED = "discarded"  # that 401 has been read in full
    DONE = "done"  # the whole answer went to the client
    SPLICED = "spliced"  # after a 101: bytes pass untouched both ways


# A member read through its class costs ~85 ns, a module global ~10: the hot path uses these.
_IDLE, _HEAD, _INTERIM, _BODY, _DISCARDING, _DISCARDED, _DONE, _SPLICED = tuple(Answer)


class AnswerEvents(Protocol):
    """What an upstream connection reports about the answer it reads; a request (request.py) implements it."""

    def answer_head(self, status: int, close_delimited: bool) -> bool:
        """The answer's head is about to go out; whether the client's connection stays open after it."""
        ...

    def may_retry_unauthorized(self) -> bool:
        """A 401 arrived: whether it is to be discarded and the request sent again."""
        ...

    def send(self, data: bytes) -> None:
        """Bytes of the answer for the client."""
        ...

    def answered(self, conn: UpstreamConnection, reusable: bool) -> None:
        """The answer went out in full; ``conn`` is free (``reusable`` if its framing allows)."""
        ...

    def unauthorized(self, conn: UpstreamConnection, reusable: bool) -> None:
        """The 401 was read and discarded; ``conn`` is free."""
        ...

    def upstream_failed(self, conn: UpstreamConnection, message: str) -> None:
        """The answer cannot be completed; ``conn`` is to be closed."""
        ...

    def splice(self, conn: UpstreamConnection) -> asyncio.Transport:
        """The upstream switched protocols: the client's transport, to pass bytes to untouched."""
        ...

    def upstream_paused(self) -> None: ...

    def upstream_resumed(self) -> None: ...


class Owner(Protocol):
    """Who holds a connection while it is idle (the pool)."""

    def forget(self, conn: UpstreamConnection) -> None: ...


class _HeadTooLarge(Exception):
    """Raised inside a parser callback: the answer's head exceeds the proxy's bound."""


# One read buffer for every upstream connection: the event loop fills it and calls buffer_updated
# at once, with nothing in between. Through TLS this saves the 256 KiB bytes object that the SSL
# transport would otherwise allocate (and page-fault in) for every read of a small answer. An
# anonymous mapping, not a bytearray: its pages cost memory only once a read has reached them.
_READ_VIEW = memoryview(mmap.mmap(-1, 256 * 1024))


class UpstreamConnection(asyncio.BufferedProtocol):
    """A connection from the pool, bound to one request at a time."""

    def __init__(self, owner: Owner) -> None:
        self._owner = owner
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # it served a request before: it may have gone stale while idle
        self.idle_since = 0.0
        self.state = _IDLE
        self.events: AnswerEvents | None = None
        self.progress = 0  # grows with every read and every drained write: the sweep watches it
        self._limits = Limits()
        self._head_only = False  # the bound request is HEAD: its answer ends at the head
        self._http11 = True
        self._upgrade = False
        self._parser = httptools.HttpResponseParser(self)
        self._headers: list[tuple[bytes, bytes]] = []
        self._last_head = headers.last_response()
        self._reason = b""
        self._out: list[bytes] = []
        self._rechunk = False  # towards the client, the body is chunked by the proxy
        self._to_close = False  # the answer ends when the upstream closes
        self._reusable = False  # the upstream's answer allows another request on this connection
        self._spliced: asyncio.Transport | None = None
        self._reading_paused = False  # by the client's back-pressure
        self._head_bytes = 0  # bytes of the answer's head read so far (while in HEAD/INTERIM)
        self._head_fields = 0

    @property
    def head_sent(self) -> bool:
        """The client has the answer's head: from here a failure can only cut the connection."""
        return self.state is _BODY or self.state is _DONE

    @property
    def received(self) -> bool:
        """Any byte of the current answer arrived (else a reused connection may just have gone stale)."""
        return self.state is not _HEAD or self._head_bytes > 0

    # -- binding -----------------------------------------------------------------------------

    def bind(
        self, events: AnswerEvents, limits: Limits, *, head_only: bool, http11: bool, upgrade: bool
    ) -> None:
        self.events = events
        self.state = _HEAD
        self._limits = limits
        self._head_only = head_only
        self._http11 = http11
        self._upgrade = upgrade
        self._rechunk = self._to_close = False
        self._head_bytes = self._head_fields = 0

    def unbind(self) -> None:
        """Forget the request; the caller closes or pools the connection."""
        self.events = None
        self.state = _IDLE
        # The answer may have ended in the very read whose relay filled the client's buffer: the
        # pause was that client's, and a pooled connection must read its next answer.
        self.resume_reading()

    def pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self.closed:
            self._reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None and not self.closed:
            self._reading_paused = False
            self.transport.resume_reading()

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def close(self) -> None:
        self.events = None
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def get_buffer(self, sizehint: int) -> memoryview:
        return _READ_VIEW

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(_READ_VIEW[:nbytes]))

    def data_received(self, data: bytes) -> None:
        if self._spliced is not None:
            self._spliced.write(data)
            return
        events = self.events
        if events is None:
            self.close()  # bytes nobody asked for: the connection is not in a known state
            return
        self.progress += 1
        out = self._out
        state = self.state
        in_head = state is _HEAD or state is _INTERIM
        if in_head:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            if self.head_sent and self._upgrade:  # a 101 (its message ends at the head)
                out.append(data[exc.args[0] :])
                self._flush(events)
                self.state = _SPLICED
                self._spliced = events.splice(self)
                return
            self._flush(events)
            events.upstream_failed(self, "the upstream switched protocols unasked")
            return
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, _HeadTooLarge):
                raise
            events.upstream_failed(self, self._too_large())
            return
        except httptools.HttpParserError:
            self._flush(events)
            events.upstream_failed(self, "the upstream sent a malformed answer")
            return
        state = self.state
        if (state is _HEAD or state is _INTERIM) and self._head_bytes > self._limits.header_bytes:
            # checked after each read: httptools joins a header's pieces by copying, so an endless
            # line would otherwise cost quadratic time, and memory without bound
            events.upstream_failed(self, self._too_large())
            return
        if out:
            self._flush(events)
        if state is _DONE or state is _DISCARDED:
            self._finish(events)

    def eof_received(self) -> bool | None:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        events = self.events
        if self._spliced is not None:
            self._spliced.close()
            return
        if events is None:
            self._owner.forget(self)
            return
        state = self.state
        if state is _DISCARDING or state is _DISCARDED:
            self.events = None
            events.unauthorized(self, False)
            return
        if state is _BODY and self._to_close:
            self._reusable = False
            if self._rechunk:
                self._out.append(b"0\r\n\r\n")
            self._flush(events)
            self.state = _DONE
            self._finish(events)
            return
        events.upstream_failed(self, "the upstream closed the connection before answering in full")

    def pause_writing(self) -> None:
        if self.events is not None:
            self.events.upstream_paused()

    def resume_writing(self) -> None:
        self.progress += 1
        if self.events is not None:
            self.events.upstream_resumed()

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._headers = []

    def on_status(self, reason: bytes) -> None:
        self._reason = reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._head_fields += 1
        if self._head_fields > self._limits.header_count:
            raise _HeadTooLarge

    def on_headers_complete(self) -> None:
        events = self.events
        assert events is not None
        parser = self._parser
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # the proxy already answered Expect itself; others mean nothing here. Interim heads
            # count towards the head's bound: a flood of them is bounded too.
            self.state = _INTERIM
            return
        if status == 401 and events.may_retry_unauthorized():
            self.state = _DISCARDING
            self._reusable = parser.should_keep_alive()
            if self._head_only:
                self._end_head_answer(_DISCARDED)
            return
        head = self._last_head.filter(self._headers)
        lines = [status_line(status, self._reason), head.lines]
        no_body = self._head_only or status in _NO_BODY_STATUSES or status == 101
        close_delimited = False
        if status == 101:
            lines.append(b"Connection: Upgrade\r\nUpgrade: " + head.upgrade + b"\r\n")
        elif not no_body and (head.chunked or head.length < 0):
            self._to_close = not head.chunked
            if self._http11:
                self._rechunk = True
                lines.append(b"Transfer-Encoding: chunked\r\n")
            else:
                close_delimited = True  # an HTTP/1.0 client learns the end by the close
        if not events.answer_head(status, close_delimited):
            lines.append(b"Connection: close\r\n")
        elif not self._http11:
            lines.append(b"Connection: keep-alive\r\n")  # HTTP/1.0 closes unless told (RFC 9112 §9.3)
        lines.append(b"\r\n")
        self._out.append(b"".join(lines))
        self.state = _BODY
        if self._head_only:
            self._reusable = parser.should_keep_alive()
            self._end_head_answer(_DONE)

    def _end_head_answer(self, state: Answer) -> None:
        """A HEAD answer ends at its head; httptools cannot be told so and would wait for a body."""
        self._parser = httptools.HttpResponseParser(self)
        self.state = state

    def on_body(self, body: bytes) -> None:
        if self.state is not _BODY:
            return  # a discarded 401, or bytes an upstream sent after a HEAD answer's head
        if self._rechunk:
            self._out.append(b"%x\r\n%b\r\n" % (len(body), body))
        else:
            self._out.append(body)

    def on_message_complete(self) -> None:
        state = self.state
        if state is _INTERIM:
            self.state = _HEAD
            return
        if state is _DONE or state is _DISCARDED:
            return  # the HEAD answer's replaced parser: already finished
        self._reusable = self._parser.should_keep_alive()
        if state is _DISCARDING:
            self.state = _DISCARDED
            return
        if self._rechunk:
            self._out.append(b"0\r\n\r\n")
        self.state = _DONE

    # -- helpers ---------------------------------------------------------------------------------

    def _too_large(self) -> str:
        limits = self._limits
        return (
            f"the upstream's answer head is larger than {limits.header_bytes} bytes "
            f"or has more than {limits.header_count} header fields"
        )

    def _flush(self, events: AnswerEvents) -> None:
        out = self._out
        if out:
            events.send(out[0] if len(out) == 1 else b"".join(out))
            out.clear()

    def _finish(self, events: AnswerEvents) -> None:
        # After an upgrade request the upstream's idea of the framing may differ from ours: never reuse.
        reusable = self._reusable and not self._to_close and not self._upgrade
        discarded = self.state is _DISCARDED
        self.events = None
        if discarded:
            events.unauthorized(self, reusable)
        else:
            events.answered(self, reusable)
