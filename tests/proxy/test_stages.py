"""The named states a client connection and its request go through, as the timeouts read them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from tokenrelay.proxy.http1.downstream import ClientConnection, Phase, Stage

from ..support.proxy import Handler, StartProxy, Tokens
from ..support.waiting import eventually

RawUpstream = Callable[[Handler], Awaitable[str]]


async def test_a_connection_walks_body_sent_answered_spliced_closed(
    raw_upstream: RawUpstream, start_proxy: StartProxy
) -> None:
    """A body arriving, then sent and awaiting its answer, then idle; an upgrade splices; a close ends it."""
    answer_now = asyncio.Event()

    async def answer_then_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if b"Upgrade: chat" in head:
                    writer.write(
                        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: chat\r\n\r\n"
                    )
                    while data := await reader.read(65536):
                        writer.write(data)
                    break
                await reader.readexactly(4)
                await answer_now.wait()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        writer.close()

    url = await raw_upstream(answer_then_echo)
    proxy = await start_proxy(url, Tokens().build(url))
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
        await eventually(lambda: len(proxy.connections) == 1, "the connection")
        (held,) = proxy.connections
        assert isinstance(held, ClientConnection)
        await eventually(lambda: (held.phase, held.stage) == (Phase.BODY, Stage.RECEIVING), "the body")
        writer.write(b"cd")
        await eventually(lambda: (held.phase, held.stage) == (Phase.HEAD, Stage.SENT), "the request sent")
        answer_now.set()
        async with asyncio.timeout(5):
            assert (await reader.readuntil(b"\r\n\r\nok")).startswith(b"HTTP/1.1 200 OK")
        await eventually(lambda: (held.phase, held.stage) == (Phase.HEAD, None), "the answer's end")

        writer.write(b"GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: chat\r\n\r\n")
        async with asyncio.timeout(5):
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101 Switching Protocols")
            assert held.phase is Phase.SPLICED
            writer.write(b"ping")
            assert await reader.readexactly(4) == b"ping"
    finally:
        writer.close()
    await eventually(lambda: held.phase is Phase.CLOSED, "the connection closed")
