"""What an upstream's faults must not turn into: a request run twice, unbounded memory, a stuck pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import aiohttp

from .conftest import Handler, Observed, StartProxy, Tokens, body_of, raw

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
