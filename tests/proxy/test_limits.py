"""Limits against abusive clients, WebSocket pass-through and draining on stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import aiohttp
import pytest

from tokenrelay.testing import FakeClock

from ..support.proxy import Echo, Observed, Proxied, StartProxy, Tokens, body_of, raw


async def test_too_many_headers_and_too_large_head_get_431(proxied: Proxied) -> None:
    """Over 100 header fields, or a head over 32 KiB, gets 431; the proxy keeps serving others."""
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
    answer = await raw(proxied.port, b"GET /x HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
    assert body_of(answer)["details"][0]["reason"] == "HEADERS_TOO_LARGE"
    huge = b"GET /x HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (200 * 1024)
    assert (await raw(proxied.port, huge)).startswith(b"HTTP/1.1 431")
    assert proxied.echo.seen == []
    async with aiohttp.ClientSession() as session, session.get(proxied.url + "/fine") as response:
        assert response.status == 200


async def test_slow_request_head_gets_408(echo: Echo, start_proxy: StartProxy) -> None:
    """A client that dribbles its request head (slowloris) gets 408 and is disconnected."""
    clock = FakeClock()
    proxy = await start_proxy(echo.url, Tokens().build(echo.url), clock=clock)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"GET /x HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    answer = b""
    async with asyncio.timeout(5):
        while not answer:
            clock.tick(11.0)  # past the 10 s header timeout, once the proxy has the first bytes
            proxy.check_timeouts()
            with contextlib.suppress(TimeoutError):
                answer = await asyncio.wait_for(reader.read(-1), 0.05)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout")
    assert body_of(answer)["details"][0]["reason"] == "HEADER_TIMEOUT"
    assert echo.seen == []


async def test_idle_keep_alive_connections_are_closed(echo: Echo, start_proxy: StartProxy) -> None:
    """A keep-alive client connection with no request for 75 s is closed; a busy one is not."""
    clock = FakeClock()
    proxy = await start_proxy(echo.url, Tokens().build(echo.url), clock=clock)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]))
    clock.tick(74.0)
    proxy.check_timeouts()
    writer.write(b"GET /y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert b"/y" in await asyncio.wait_for(reader.read(-1), 5)  # still open at 74 s
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"GET /z HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]))
    clock.tick(76.0)
    proxy.check_timeouts()
    assert await asyncio.wait_for(reader.read(-1), 5) == b""  # closed by the proxy
    writer.close()


async def test_connections_over_the_maximum_get_503(echo: Echo, start_proxy: StartProxy) -> None:
    """Past --proxy-max-connections a new client gets 503 at once; the held ones keep working."""
    observed = Observed()
    proxy = await start_proxy(echo.url, Tokens().build(echo.url), observer=observed, max_connections=2)
    held = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(2)]
    answer = await raw(proxy.port, b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable")
    assert body_of(answer)["details"][0]["reason"] == "TOO_MANY_CONNECTIONS"
    reader, writer = held[0]
    writer.write(b"GET /still HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await reader.read(-1)).startswith(b"HTTP/1.1 200 OK")
    for _, writer in held:
        writer.close()


async def test_websocket_passes_through_with_the_token(proxied: Proxied) -> None:
    """A WebSocket upgrade reaches the upstream with the token, then frames flow both ways."""
    async with aiohttp.ClientSession() as session, session.ws_connect(proxied.url + "/ws") as ws:
        assert await ws.receive_str() == "hello t1"
        for word in ("one", "two"):
            await ws.send_str(word)
            assert await ws.receive_str() == f"echo {word}"
    assert proxied.observed.codes == [101]


async def test_stop_drains_requests_in_flight(proxied: Proxied) -> None:
    """On stop a request in flight still gets its answer; idle connections are closed."""
    async with aiohttp.ClientSession() as session:
        in_flight = asyncio.ensure_future(session.get(proxied.url + "/slow"))
        deadline = time.monotonic() + 10
        while not proxied.echo.seen:
            assert time.monotonic() < deadline, "the request never reached the upstream"
            await asyncio.sleep(0.01)
        stopping = asyncio.ensure_future(proxied.proxy.stop())
        await asyncio.sleep(0)
        assert not stopping.done()
        proxied.echo.gate.set()
        response = await in_flight
        assert response.status == 200
        assert await response.json() == {"slow": "done"}
        assert response.headers["Connection"] == "close"
        await stopping


async def test_remote_listen_logs_a_warning(
    echo: Echo, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Listening beyond loopback (allowed by --proxy-allow-remote) is logged as a warning."""
    from tokenrelay.proxy import ProxyServer

    proxy = ProxyServer(echo.url, Tokens().build(echo.url), listen=("0.0.0.0", 0), allow_remote=True)
    with caplog.at_level(logging.WARNING, logger="tokenrelay.proxy"):
        await proxy.start()
    await proxy.stop()
    assert any("non-loopback" in record.getMessage() for record in caplog.records)


async def test_bytes_sent_before_the_101_follow_the_upgrade(proxied: Proxied) -> None:
    """A WebSocket frame written right behind the handshake is held until the 101, then delivered."""
    mask = b"\x01\x02\x03\x04"
    frame = b"\x81\x83" + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(b"abc"))
    reader, writer = await asyncio.open_connection("127.0.0.1", proxied.port)
    writer.write(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" + frame
    )
    received = b""
    async with asyncio.timeout(5):
        while b"echo abc" not in received:
            chunk = await reader.read(65536)
            assert chunk, received
            received += chunk
    writer.close()
    assert received.startswith(b"HTTP/1.1 101 Switching Protocols")
    assert b"hello t1" in received
