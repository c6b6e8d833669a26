"""Refusals and failures: what the client gets when the token, the upstream or the request is wrong."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import aiohttp

from tokenrelay.lite import aip193

from ..support.proxy import Echo, Handler, Observed, Proxied, StartProxy, Tokens, body_of, raw


def reason_of(payload: dict[str, object]) -> tuple[object, object, object]:
    parsed = aip193.parse(__import__("json").dumps(payload))
    assert parsed is not None
    details = payload["details"]
    assert isinstance(details, list)
    return parsed[0], parsed[2], details[0]["domain"]


async def test_401_refreshes_once_and_retries(proxied: Proxied) -> None:
    """A revoked token heals: one refresh for all concurrent callers, each request retried once."""
    async with aiohttp.ClientSession() as session:
        async with session.get(proxied.url + "/warm") as response:
            assert response.status == 200
        proxied.echo.revoked.add("t1")
        proxied.echo.seen.clear()

        async def one(i: int) -> int:
            async with session.post(proxied.url + f"/r{i}", data=b"small body") as response:
                seen = await response.json()
                assert seen["token"] == "t2"
                assert seen["body"] == "small body"
                return response.status

        statuses = await asyncio.gather(*(one(i) for i in range(20)))
    assert statuses == [200] * 20
    assert proxied.tokens.fetches == 2
    assert proxied.observed.retries == 20
    assert sorted(s["token"] for s in proxied.echo.seen) == ["t1"] * 20 + ["t2"] * 20


async def test_401_with_an_unreplayable_body_passes_through(proxied: Proxied) -> None:
    """A body over 64 KiB is not kept for a retry: the client gets the upstream's 401 as it was."""
    proxied.echo.revoked.add("t1")
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxied.url + "/big", data=b"x" * (65 * 1024)) as response,
    ):
        assert response.status == 401
        assert (await response.json())["message"] == "token revoked"
    assert len(proxied.echo.seen) == 1
    assert proxied.observed.retries == 0


async def test_no_token_answers_503_token_unavailable(echo: Echo, start_proxy: StartProxy) -> None:
    """Without a valid token nothing is forwarded: 503, code 14, TOKEN_UNAVAILABLE from tokenrelay."""
    tokens = Tokens(fail=True)
    proxy = await start_proxy(echo.url, tokens.build(echo.url))
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{proxy.port}/x") as r:
        assert r.status == 503
        payload = await r.json()
    assert reason_of(payload) == (14, "TOKEN_UNAVAILABLE", "tokenrelay")
    assert echo.seen == []


async def test_unreachable_upstream_answers_502(start_proxy: StartProxy) -> None:
    """An upstream nobody listens on: 502, code 14, UPSTREAM_UNREACHABLE."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proxy = await start_proxy(url, Tokens().build(url))
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{proxy.port}/x") as r:
        assert r.status == 502
        assert reason_of(await r.json()) == (14, "UPSTREAM_UNREACHABLE", "tokenrelay")


async def test_slow_upstream_answers_504(echo: Echo, start_proxy: StartProxy) -> None:
    """An upstream that does not answer within --proxy-timeout: 504, code 4."""
    url = echo.url + "/base"
    observed = Observed()
    proxy = await start_proxy(url, Tokens().build(url), observer=observed, upstream_timeout=0.2)
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{proxy.port}/slow") as r:
        assert r.status == 504
        assert reason_of(await r.json()) == (4, "UPSTREAM_TIMEOUT", "tokenrelay")
    echo.gate.set()
    assert observed.codes == [504]


async def test_upstream_closing_mid_answer_answers_502(
    raw_upstream: Callable[[Handler], Awaitable[str]], start_proxy: StartProxy
) -> None:
    """An upstream that hangs up before answering in full: 502 UPSTREAM_FAILED, or a cut if begun."""

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if b"/partial" in request:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly a part")
            await writer.drain()
        writer.close()

    url = await raw_upstream(hang_up)
    proxy = await start_proxy(url, Tokens().build(url))
    answer = await raw(proxy.port, b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway")
    assert reason_of(body_of(answer)) == (14, "UPSTREAM_FAILED", "tokenrelay")
    partial = await raw(proxy.port, b"GET /partial HTTP/1.1\r\nHost: x\r\n\r\n")
    assert partial.startswith(b"HTTP/1.1 200 OK")
    assert partial.endswith(b"only a part")  # the client sees a short body, as from the upstream


async def test_answer_without_length_is_read_to_close(
    raw_upstream: Callable[[Handler], Awaitable[str]], start_proxy: StartProxy
) -> None:
    """An answer framed by the upstream's close reaches an HTTP/1.1 client whole, re-chunked."""

    async def close_framed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        await writer.drain()
        writer.close()

    url = await raw_upstream(close_framed)
    proxy = await start_proxy(url, Tokens().build(url))
    async with aiohttp.ClientSession() as session:
        for _ in range(2):
            async with session.get(f"http://127.0.0.1:{proxy.port}/x") as response:
                assert response.headers["Transfer-Encoding"] == "chunked"
                assert await response.read() == b"until the end"


async def test_stale_pooled_connection_is_retried(
    raw_upstream: Callable[[Handler], Awaitable[str]], start_proxy: StartProxy
) -> None:
    """A keep-alive connection the upstream dropped while idle never surfaces as an error."""

    async def one_per_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.read(1)  # the next request, if any, is dropped unanswered
        writer.close()

    url = await raw_upstream(one_per_connection)
    observed = Observed()
    proxy = await start_proxy(url, Tokens().build(url), observer=observed)
    async with aiohttp.ClientSession() as session:
        for _ in range(3):
            async with session.get(f"http://127.0.0.1:{proxy.port}/x") as response:
                assert response.status == 200
                assert await response.read() == b"ok"
    assert observed.codes == [200, 200, 200]


async def test_connect_is_refused_with_405(proxied: Proxied) -> None:
    """CONNECT is never honoured: 405, and nothing reaches the upstream."""
    answer = await raw(proxied.port, b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 Method Not Allowed")
    assert reason_of(body_of(answer))[1] == "METHOD_NOT_ALLOWED"
    assert proxied.echo.seen == []


async def test_absolute_form_naming_another_host_is_refused(proxied: Proxied) -> None:
    """Used as a forward proxy for another host: 400, nothing forwarded; the upstream's own host works."""
    answer = await raw(proxied.port, b"GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 Bad Request")
    assert reason_of(body_of(answer))[1] == "FOREIGN_TARGET"
    sneaky = b"GET http://127.0.0.1@example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n"
    assert (await raw(proxied.port, sneaky)).startswith(b"HTTP/1.1 400")
    assert proxied.echo.seen == []
    own = proxied.echo.url.encode() + b"/y?z=1"
    answer = await raw(proxied.port, b"GET " + own + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert body_of(answer)["path"] == "/base/y?z=1"


async def test_absolute_form_naming_another_port_of_the_upstreams_host_is_refused(
    proxied: Proxied, raw_upstream: Callable[[Handler], Awaitable[str]]
) -> None:
    """Another port on the upstream's host is another service: 400 FOREIGN_TARGET, and neither it nor
    the upstream gets the request (with the token); nor does an https URI for the plain-http upstream."""
    reached: list[bytes] = []

    async def other_service(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.append(await reader.read(65536))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        writer.close()

    other = (await raw_upstream(other_service)).encode()  # http://127.0.0.1:<another port>
    own = proxied.echo.url.encode()
    for target in [other + b"/x", b"http://127.0.0.1/x", own.replace(b"http:", b"https:") + b"/x"]:
        request = b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        answer = await raw(proxied.port, request)
        assert answer.startswith(b"HTTP/1.1 400 Bad Request"), target
        assert reason_of(body_of(answer))[1] == "FOREIGN_TARGET", target
    assert reached == []
    assert proxied.echo.seen == []


async def test_malformed_request_gets_400(proxied: Proxied) -> None:
    """A request the parser rejects (here: both framings at once, a smuggling attempt) gets 400."""
    answer = await raw(
        proxied.port,
        b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 400 Bad Request")
    assert proxied.echo.seen == []


async def test_broken_chunked_body_cuts_the_connection(proxied: Proxied) -> None:
    """A request whose chunked body turns to garbage is cut off instead of waiting forever."""
    answer = await raw(
        proxied.port,
        b"POST /slow HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZZ\r\n",
    )
    assert answer == b""
