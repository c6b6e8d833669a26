"""What an upstream's faults must not turn into: a request run twice, unbounded memory, a stuck pool."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable

import aiohttp
import pytest

from tokenrelay.proxy.bearer import REJECT_INTERVAL
from tokenrelay.proxy.http1.downstream import ClientConnection
from tokenrelay.testing import FakeClock

from ..support.proxy import Echo, Handler, Observed, StartProxy, Tokens, body_of, raw

RawUpstream = Callable[[Handler], Awaitable[str]]


async def test_post_is_not_resent_when_a_reused_connection_drops(
    raw_upstream: RawUpstream, start_proxy: StartProxy
) -> None:
    """A POST the upstream may have processed is never sent twice: 502; a GET is still retried."""
    received: list[bytes] = []

    async def one_answer_then_drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            received.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            received.append(await reader.readuntil(b"\r\n\r\n"))  # read, maybe acted on, never answered
        writer.close()

    url = await raw_upstream(one_answer_then_drop)
    observed = Observed()
    proxy = await start_proxy(url, Tokens().build(url), observer=observed)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{proxy.port}/first") as response:
            assert await response.read() == b"ok"
        async with session.post(f"http://127.0.0.1:{proxy.port}/create", data=b"{}") as response:
            assert response.status == 502
            assert (await response.json())["details"][0]["reason"] == "UPSTREAM_FAILED"
        for path in ("/read", "/again"):  # /again: dropped on the reused connection, sent again
            async with session.get(f"http://127.0.0.1:{proxy.port}{path}") as response:
                assert await response.read() == b"ok"
    methods = [head.split(b" ", 1)[0] for head in received]
    assert methods.count(b"POST") == 1
    assert methods.count(b"GET") == 4
    assert observed.retries == 1


async def test_oversized_answer_heads_get_502(raw_upstream: RawUpstream, start_proxy: StartProxy) -> None:
    """An answer head over 32 KiB (many lines, or one endless value) gets 502 at once, not memory."""

    async def huge_heads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            request = await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\n")
            if b"/lines" in request:
                writer.write((b"X-Pad: " + b"a" * 100 + b"\r\n") * 15000)  # 1.6 MB of lines
            else:
                writer.write(b"X-Big: ")
                for _ in range(64):  # 64 MiB of one value, unless the proxy hangs up first
                    writer.write(b"b" * (1 << 20))
                    await writer.drain()
            writer.write(b"Content-Length: 0\r\n\r\n")
            await writer.drain()
            await reader.read()
        writer.close()

    url = await raw_upstream(huge_heads)
    proxy = await start_proxy(url, Tokens().build(url))
    for path in (b"/lines", b"/value"):
        async with asyncio.timeout(5):
            answer = await raw(proxy.port, b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path)
        assert answer.startswith(b"HTTP/1.1 502 Bad Gateway"), answer[:100]
        payload = body_of(answer)
        assert payload["details"][0]["reason"] == "UPSTREAM_FAILED"
        assert "answer head is larger than 32768 bytes" in payload["message"]


async def test_connection_pooled_under_back_pressure_still_reads(
    raw_upstream: RawUpstream, start_proxy: StartProxy
) -> None:
    """An answer that ends as its client's buffer fills leaves no paused connection in the pool."""

    async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                answer = b"x" * 30_000 if b"/big" in request else b"small"
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))

    url = await raw_upstream(keep_alive)
    observed = Observed()
    proxy = await start_proxy(url, Tokens().build(url), observer=observed)
    loop = asyncio.get_running_loop()
    with socket.socket() as slow:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.setblocking(False)
        await loop.sock_connect(slow, ("127.0.0.1", proxy.port))
        while not proxy.connections:
            await asyncio.sleep(0.01)
        # A client that stopped reading, behind a link slower than loopback: the proxy's side of
        # the connection holds little in the kernel and reports a full buffer at once.
        (held,) = proxy.connections
        assert isinstance(held, ClientConnection)
        assert held.transport is not None
        held.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        held.transport.set_write_buffer_limits(high=0)
        await loop.sock_sendall(slow, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(5):
            while observed.codes != [200]:  # relayed in full (into the proxy's buffer): pooled
                await asyncio.sleep(0.01)
        async with asyncio.timeout(3):  # the next request takes the pooled connection
            answer = await raw(proxy.port, b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.endswith(b"\r\n\r\nsmall")


async def test_a_stream_of_401s_forces_one_refresh_per_interval(
    echo: Echo, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream refusing every token gets one forced refresh per 30 s, not one per request."""
    clock = FakeClock()
    tokens = Tokens()
    url = echo.url + "/base"
    proxy = await start_proxy(url, tokens.build(url), clock=clock)
    echo.revoked.update(f"t{i}" for i in range(1, 100))
    with caplog.at_level(logging.INFO, logger="tokenrelay.proxy"):
        async with aiohttp.ClientSession() as session:

            async def statuses(count: int) -> list[int]:
                answers = []
                for i in range(count):
                    async with session.get(f"http://127.0.0.1:{proxy.port}/r{i}") as response:
                        answers.append(response.status)
                return answers

            assert await statuses(20) == [401] * 20
            assert tokens.fetches == 2  # the first token, and the one 401-forced refresh
            clock.tick(REJECT_INTERVAL)
            assert await statuses(20) == [401] * 20
            assert tokens.fetches == 3
    assert [s["token"] for s in echo.seen[:3]] == ["t1", "t2", "t2"]
    refreshes = [r for r in caplog.records if "refreshing it" in r.getMessage()]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(refreshes) == 2
    assert len(warnings) == 2  # one "401s go to clients" per interval, not one per request


async def test_an_upstream_stalling_mid_answer_is_cut(
    raw_upstream: RawUpstream, start_proxy: StartProxy
) -> None:
    """An answer that stops arriving for --proxy-timeout ends the client's connection (a short body)."""

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nten bytes!")
            await reader.read()  # and nothing more, ever
        writer.close()

    url = await raw_upstream(stall)
    clock = FakeClock()
    proxy = await start_proxy(url, Tokens().build(url), clock=clock, upstream_timeout=60.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
    received = await asyncio.wait_for(reader.readuntil(b"ten bytes!"), 5)
    proxy.check_timeouts()
    clock.tick(59.0)
    proxy.check_timeouts()
    clock.tick(2.0)
    proxy.check_timeouts()
    received += await asyncio.wait_for(reader.read(-1), 5)
    writer.close()
    assert received.startswith(b"HTTP/1.1 200 OK")
    assert received.endswith(b"\r\n\r\nten bytes!")  # cut: fewer than the 100 bytes announced


async def test_an_upstream_not_reading_the_request_gets_504(
    raw_upstream: RawUpstream, start_proxy: StartProxy
) -> None:
    """An upstream that takes the head but never reads the body: 504 after --proxy-timeout."""

    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(30)  # the body piles up in the kernel, then in the proxy
        writer.close()

    url = await raw_upstream(deaf)
    clock = FakeClock()
    proxy = await start_proxy(url, Tokens().build(url), clock=clock, upstream_timeout=60.0)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"PUT /deaf HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
    chunk = b"x" * 65536
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(0.5):  # until the proxy stops reading: everything is full
            while True:
                writer.write(chunk)
                await writer.drain()
    proxy.check_timeouts()
    clock.tick(61.0)
    proxy.check_timeouts()
    answer = await asyncio.wait_for(reader.read(-1), 5)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 504 Gateway Timeout")
    assert body_of(answer)["details"][0]["reason"] == "UPSTREAM_TIMEOUT"
