"""The upstream half alone: what an UpstreamConnection reports about real answers, no client socket."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tokenrelay.proxy.http1.upstream import AnswerEvents, UpstreamConnection
from tokenrelay.proxy.limits import Limits


@dataclass
class Recorded:
    """An AnswerEvents that writes down what it hears, as the client side would act on it."""

    retry_401: bool = True
    sent: bytearray = field(default_factory=bytearray)
    events: list[tuple[str, object]] = field(default_factory=list)
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def answer_head(self, status: int, close_delimited: bool) -> bool:
        self.events.append(("head", status))
        return True

    def may_retry_unauthorized(self) -> bool:
        return self.retry_401

    def send(self, data: bytes) -> None:
        self.sent += data

    def answered(self, conn: UpstreamConnection, reusable: bool) -> None:
        self._end("answered", reusable)

    def unauthorized(self, conn: UpstreamConnection, reusable: bool) -> None:
        self._end("unauthorized", reusable)

    def upstream_failed(self, conn: UpstreamConnection, message: str) -> None:
        conn.close()
        self._end("failed", message)

    def splice(self, conn: UpstreamConnection) -> asyncio.Transport:
        raise AssertionError("no upgrade was asked for")

    def upstream_paused(self) -> None:
        pass

    def upstream_resumed(self) -> None:
        pass

    def _end(self, event: str, detail: object) -> None:
        self.events.append((event, detail))
        self.ended.set()


class Owner:
    def forget(self, conn: UpstreamConnection) -> None:
        pass


ANSWERS = {
    b"/ok": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Kept: 1\r\nKeep-Alive: timeout=5\r\n\r\nok",
    b"/refused": b'HTTP/1.1 401 Unauthorized\r\nContent-Length: 9\r\n\r\n{"no":1}\n',
    b"/interim": b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
}


@pytest.fixture
async def upstream() -> AsyncIterator[int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                writer.write(ANSWERS[head.split(b" ")[1]])

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


async def ask(port: int, path: bytes, events: AnswerEvents, *, head_only: bool = False) -> UpstreamConnection:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(lambda: UpstreamConnection(Owner()), "127.0.0.1", port)
    conn.bind(events, Limits(), head_only=head_only, http11=True, upgrade=False)
    conn.write(b"%s %s HTTP/1.1\r\nHost: x\r\n\r\n" % (b"HEAD" if head_only else b"GET", path))
    return conn


async def test_an_answer_is_relayed_with_hop_by_hop_headers_dropped(upstream: int) -> None:
    """A 200 goes to the client side whole, without Keep-Alive; the connection is reusable."""
    events = Recorded()
    conn = await ask(upstream, b"/ok", events)
    await asyncio.wait_for(events.ended.wait(), 5)
    conn.close()
    assert bytes(events.sent) == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Kept: 1\r\n\r\nok"
    assert events.events == [("head", 200), ("answered", True)]


async def test_a_head_answer_ends_at_its_head(upstream: int) -> None:
    """HEAD's answer ends at the head, even when a broken upstream sends the body anyway."""
    events = Recorded()
    conn = await ask(upstream, b"/ok", events, head_only=True)
    await asyncio.wait_for(events.ended.wait(), 5)
    conn.close()
    assert bytes(events.sent) == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Kept: 1\r\n\r\n"


async def test_a_401_to_be_retried_is_read_and_never_relayed(upstream: int) -> None:
    """A 401 the client side will retry is discarded whole (HEAD too, body or not); else it is relayed."""
    for head_only in (False, True):
        events = Recorded()
        conn = await ask(upstream, b"/refused", events, head_only=head_only)
        await asyncio.wait_for(events.ended.wait(), 5)
        conn.close()
        assert events.sent == b""
        assert events.events == [("unauthorized", True)]
    events = Recorded(retry_401=False)
    conn = await ask(upstream, b"/refused", events)
    await asyncio.wait_for(events.ended.wait(), 5)
    conn.close()
    assert bytes(events.sent).startswith(b"HTTP/1.1 401 Unauthorized\r\n")
    assert events.events == [("head", 401), ("answered", True)]


async def test_interim_answers_are_swallowed(upstream: int) -> None:
    """A 103 before the real answer never reaches the client side."""
    events = Recorded()
    conn = await ask(upstream, b"/interim", events)
    await asyncio.wait_for(events.ended.wait(), 5)
    conn.close()
    assert bytes(events.sent) == b"HTTP/1.1 204 No Content\r\n\r\n"
    assert events.events == [("head", 204), ("answered", True)]
