"""One keep-alive connection to the upstream: sends a request's bytes, relays the answer to the client.

The answer is parsed with httptools only as far as the proxy needs: the status, the header lines
(rewritten once, hop-by-hop ones dropped) and the body's framing. Body bytes go to the client as they
arrive, in one write per read; while the client's socket buffer is full the proxy stops reading from
the upstream (back-pressure). After a ``101 Switching Protocols`` both connections are spliced and
bytes flow untouched both ways.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

import httptools

from . import headers

if TYPE_CHECKING:
    from .client import ClientConnection, Exchange
    from .pool import UpstreamPool

_STATUS_LINES: dict[tuple[int, bytes], bytes] = {}
_NO_BODY_STATUSES = frozenset({204, 304})


def status_line(status: int, reason: bytes) -> bytes:
    line = _STATUS_LINES.get((status, reason))
    if line is None:
        line = b"HTTP/1.1 %d %s\r\n" % (status, reason)
        if len(_STATUS_LINES) < 256:
            _STATUS_LINES[status, reason] = line
    return line


class _HeadTooLarge(Exception):
    """Raised inside a parser callback: the answer's head exceeds the proxy's bound."""


# One read buffer for every upstream connection: the event loop fills it and calls buffer_updated
# at once, with nothing in between. Through TLS this saves the 256 KiB bytes object that the SSL
# transport would otherwise allocate (and page-fault in) for every read of a small answer.
_READ_BUFFER = bytearray(256 * 1024)
_READ_VIEW = memoryview(_READ_BUFFER)


class UpstreamConnection(asyncio.BufferedProtocol):
    """A connection from the pool, bound to one client exchange at a time."""

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # it served a request before: it may have gone stale while idle
        self.idle_since = 0.0
        self.client: ClientConnection | None = None
        self.exchange: Exchange | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._headers: list[tuple[bytes, bytes]] = []
        self._reason = b""
        self._out: list[bytes] = []
        self.received = False  # any byte of the current answer arrived
        self.progress = 0  # grows with every read and every drained write: the sweep watches it
        self.head_sent = False  # the client has the answer's head
        self._interim = False  # inside a 1xx answer, which the proxy swallows
        self._rechunk = False
        self._to_close = False  # the answer ends when the upstream closes
        self._discard = False  # a 401 that will be retried: not for the client
        self._done = False
        self._reusable = False
        self._spliced: asyncio.Transport | None = None
        self._reading_paused = False  # by the client's back-pressure
        self._head_bytes = -1  # bytes of the answer's head read so far; -1 once the head is complete
        self._head_fields = 0

    # -- binding -----------------------------------------------------------------------------

    def bind(self, client: ClientConnection, exchange: Exchange) -> None:
        self.client = client
        self.exchange = exchange
        self.received = self.head_sent = self._done = self._discard = False
        self._rechunk = self._to_close = self._interim = False
        self._head_bytes = self._head_fields = 0

    def unbind(self) -> None:
        """Forget the exchange; the caller closes or pools the connection."""
        self.client = None
        self.exchange = None
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
        self.client = None
        self.exchange = None
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
        client = self.client
        if client is None:
            self.close()  # bytes nobody asked for: the connection is not in a known state
            return
        self.received = True
        self.progress += 1
        out = self._out
        if self._head_bytes >= 0:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            if self.head_sent and self.exchange is not None and self.exchange.upgrade:
                out.append(data[exc.args[0] :])
                self._flush(client)
                self._splice(client)
                return
            self._flush(client)
            client.upstream_failed(self, "the upstream switched protocols unasked")
            return
        except httptools.HttpParserCallbackError as exc:
            if not isinstance(exc.__context__, _HeadTooLarge):
                raise
            client.upstream_failed(self, self._too_large(client))
            return
        except httptools.HttpParserError:
            self._flush(client)
            client.upstream_failed(self, "the upstream sent a malformed answer")
            return
        if self._head_bytes > client.limits.header_bytes:
            # checked after each read: httptools joins a header's pieces by copying, so an endless
            # line would otherwise cost quadratic time, and memory without bound
            client.upstream_failed(self, self._too_large(client))
            return
        if out:
            self._flush(client)
        if self._done:
            self._finish(client)

    def eof_received(self) -> bool | None:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        client = self.client
        if self._spliced is not None:
            self._spliced.close()
            return
        if client is None:
            self.pool.forget(self)
            return
        if self._discard:
            exchange = self.exchange
            assert exchange is not None
            self.client = self.exchange = None
            self._discard = False
            client.retry_unauthorized(exchange)
            return
        if self.head_sent and self._to_close and not self._done:
            self._reusable = False
            if self._rechunk:
                self._out.append(b"0\r\n\r\n")
            self._flush(client)
            self._done = True
            self._finish(client)
            return
        client.upstream_failed(self, "the upstream closed the connection before answering in full")

    def pause_writing(self) -> None:
        if self.client is not None:
            self.client.upstream_paused()

    def resume_writing(self) -> None:
        self.progress += 1
        if self.client is not None:
            self.client.upstream_resumed()

    # -- httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._headers = []

    def on_status(self, reason: bytes) -> None:
        self._reason = reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._head_fields += 1
        assert self.client is not None
        if self._head_fields > self.client.limits.header_count:
            raise _HeadTooLarge

    def on_headers_complete(self) -> None:
        client = self.client
        exchange = self.exchange
        assert client is not None
        assert exchange is not None
        parser = self._parser
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._interim = True  # the proxy already answered Expect itself; others mean nothing here
            return  # interim heads count towards the head's bound: a flood of them is bounded too
        self._head_bytes = -1
        if status == 401 and client.can_retry_unauthorized(exchange):
            self._discard = True
            self._reusable = parser.should_keep_alive()
            if exchange.head_only:
                self._end_head_answer()
            return
        head = headers.response(self._headers)
        lines = [status_line(status, self._reason), head.lines]
        no_body = exchange.head_only or status in _NO_BODY_STATUSES or status == 101
        if status == 101:
            lines.append(b"Connection: Upgrade\r\nUpgrade: " + head.upgrade + b"\r\n")
        elif not no_body and (head.chunked or head.length < 0):
            self._to_close = not head.chunked
            if exchange.http11:
                self._rechunk = True
                lines.append(b"Transfer-Encoding: chunked\r\n")
            else:
                exchange.keep_alive = False  # an HTTP/1.0 client learns the end by the close
        if not client.keeps_alive(exchange):
            lines.append(b"Connection: close\r\n")
        elif not exchange.http11:
            lines.append(b"Connection: keep-alive\r\n")  # HTTP/1.0 closes unless told (RFC 9112 §9.3)
        lines.append(b"\r\n")
        self._out.append(b"".join(lines))
        self.head_sent = True
        exchange.status = status
        if exchange.head_only:
            self._reusable = parser.should_keep_alive()
            self._end_head_answer()

    def _end_head_answer(self) -> None:
        """A HEAD answer ends at its head; httptools cannot be told so and would wait for a body."""
        self._parser = httptools.HttpResponseParser(self)
        self._done = True

    def on_body(self, body: bytes) -> None:
        if self._discard:
            return
        if self._rechunk:
            self._out.append(b"%x\r\n%b\r\n" % (len(body), body))
        else:
            self._out.append(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        if self._done:
            return  # the HEAD answer's replaced parser: already finished
        if self._rechunk:
            self._out.append(b"0\r\n\r\n")
        self._reusable = self._parser.should_keep_alive()
        self._done = True

    # -- helpers ---------------------------------------------------------------------------------

    def _too_large(self, client: ClientConnection) -> str:
        limits = client.limits
        return (
            f"the upstream's answer head is larger than {limits.header_bytes} bytes "
            f"or has more than {limits.header_count} header fields"
        )

    def _flush(self, client: ClientConnection) -> None:
        out = self._out
        if out:
            client.send(out[0] if len(out) == 1 else b"".join(out))
            out.clear()

    def _finish(self, client: ClientConnection) -> None:
        exchange = self.exchange
        assert exchange is not None
        # After an upgrade request the upstream's idea of the framing may differ from ours: never reuse.
        reusable = self._reusable and not self._to_close and exchange.sent_all() and not exchange.upgrade
        self.client = None
        self.exchange = None
        self._done = False
        if self._discard:
            self._discard = False
            self.pool.release(self, reusable)
            client.retry_unauthorized(exchange)
            return
        self.pool.release(self, reusable)
        client.answered(exchange)

    def _splice(self, client: ClientConnection) -> None:
        """From here on, bytes pass untouched both ways (a WebSocket after its handshake)."""
        self._spliced = client.splice(self)
