"""What a client's request shape must not break: HEAD after a 401, TRACE, HTTP/1.0 keep-alive."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
from collections.abc import Awaitable, Callable

import pytest

from tokenrelay.testing import FakeClock

from ..support.proxy import Echo, Handler, Proxied, StartProxy, Tokens, body_of, raw


async def test_head_answered_401_is_retried_without_waiting_for_a_body(proxied: Proxied) -> None:
    """HEAD whose first answer is a 401 gets the retried answer at once, not a 504 after the timeout."""
    proxied.echo.revoked.add("t1")
    async with asyncio.timeout(2):
        answer = await raw(proxied.port, b"HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert [seen["token"] for seen in proxied.echo.seen] == ["t1", "t2"]


async def test_trace_is_refused(proxied: Proxied) -> None:
    """TRACE would echo the injected Authorization back to the client: 405, nothing forwarded."""
    answer = await raw(proxied.port, b"TRACE /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 Method Not Allowed")
    assert body_of(answer)["details"][0]["reason"] == "METHOD_NOT_ALLOWED"
    assert "TRACE" in body_of(answer)["message"]
    assert proxied.echo.seen == []


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ApacheBench (apache2-utils)")
async def test_apachebench_keep_alive_over_http_1_0(proxied: Proxied) -> None:
    """`ab -k` (HTTP/1.0 with Connection: keep-alive) completes, reusing its connections."""
    process = await asyncio.create_subprocess_exec(
        "ab", "-k", "-n", "40", "-c", "4", "-s", "3", proxied.url + "/ab",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(20):
        out, _ = await process.communicate()
    report = out.decode()
    assert process.returncode == 0, report
    assert re.search(r"Complete requests:\s+40\n", report), report
    assert re.search(r"Failed requests:\s+0\n", report), report
    assert re.search(r"Keep-Alive requests:\s+40\n", report), report


async def test_http_1_0_keep_alive_is_announced_or_closed(proxied: Proxied) -> None:
    """An HTTP/1.0 client asking for keep-alive is told it got it; without asking, the proxy closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", proxied.port)
    for path in (b"/one", b"/two"):
        writer.write(b"GET %s HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" % path)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"\r\nConnection: keep-alive\r\n" in head
        length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
        assert path in await reader.readexactly(length)
    writer.close()
    answer = await raw(proxied.port, b"GET /three HTTP/1.0\r\n\r\n")
    assert b"/base/three" in answer  # read to the proxy's close


async def test_trickled_request_bodies_get_408_and_free_their_slots(
    raw_upstream: Callable[[Handler], Awaitable[str]], start_proxy: StartProxy
) -> None:
    """Bodies trickled a byte at a time are cut after 20 s plus 1 s per 500 bytes; others get in."""
    heads = asyncio.Queue[bytes]()

    async def patient(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            head = await reader.readuntil(b"\r\n\r\n")
            heads.put_nowait(head)
            if b"Content-Length" in head:
                await reader.read()  # the body never completes
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        writer.close()

    url = await raw_upstream(patient)
    clock = FakeClock()
    proxy = await start_proxy(url, Tokens().build(url), clock=clock, max_connections=2)
    trickling = []
    for _ in range(2):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
        trickling.append((reader, writer))
        await asyncio.wait_for(heads.get(), 5)  # the proxy has the head: its body clock runs
    locked_out = await raw(proxy.port, b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert locked_out.startswith(b"HTTP/1.1 503")
    clock.tick(19.0)
    proxy.check_timeouts()
    for _, writer in trickling:
        writer.write(b"c")
    clock.tick(2.0)  # 21 s for 3 bytes: too slow
    proxy.check_timeouts()
    for reader, writer in trickling:
        answer = await asyncio.wait_for(reader.read(-1), 5)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout")
        assert body_of(answer)["details"][0]["reason"] == "BODY_TIMEOUT"
    answer = await raw(proxy.port, b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.endswith(b"\r\n\r\nok")


async def test_a_steady_slow_body_is_not_cut(echo: Echo, start_proxy: StartProxy) -> None:
    """A body that keeps above 500 bytes/s after its 20 s allowance goes through whole."""
    clock = FakeClock()
    proxy = await start_proxy(echo.url, Tokens().build(echo.url), clock=clock)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"POST /steady HTTP/1.1\r\nHost: x\r\nContent-Length: 30000\r\nConnection: close\r\n\r\n")
    for _ in range(10):
        writer.write(b"x" * 3000)
        await writer.drain()
        clock.tick(5.0)  # 50 s for 30 kB: 600 bytes/s
        proxy.check_timeouts()
    answer = await asyncio.wait_for(reader.read(-1), 5)
    writer.close()
    assert len(body_of(answer)["body"]) == 30000
