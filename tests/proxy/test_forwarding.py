"""What reaches the upstream, and what comes back, for ordinary requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
from yarl import URL

from ..support.proxy import Proxied, body_of, raw


async def test_injects_token_and_drops_hop_by_hop_headers(proxied: Proxied) -> None:
    """The upstream sees the current token, the upstream's Host, and none of the hop-by-hop headers."""
    headers = {
        "Authorization": "Bearer client-supplied",
        "Proxy-Authorization": "Basic c2VjcmV0",
        "Proxy-Foo": "bar",
        "Connection": "keep-alive, X-Drop-Me",
        "X-Drop-Me": "1",
        "Keep-Alive": "timeout=5",
        "TE": "trailers",
        "X-Kept": "yes",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.get(proxied.url + "/v1/things", headers=headers) as response,
    ):
        assert response.status == 200
        assert response.headers["X-Upstream"] == "yes"
        assert "Connection" not in response.headers
        seen = await response.json()
    names = {name.lower(): value for name, value in seen["headers"]}
    assert seen["token"] == "t1"
    assert names["host"] == proxied.echo.url.removeprefix("http://")
    assert names["x-kept"] == "yes"
    for dropped in ("proxy-authorization", "proxy-foo", "x-drop-me", "keep-alive", "te"):
        assert dropped not in names


async def test_connection_cannot_strip_the_content_length(proxied: Proxied) -> None:
    """`Connection: content-length` does not make the proxy drop the Content-Length that frames the
    body (a smuggling path): the upstream gets the body, framed, and no request hidden in it."""
    hidden = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    request = (
        b"POST /v1/things HTTP/1.1\r\nHost: x\r\nConnection: content-length, close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(hidden), hidden)
    )
    response = await raw(proxied.port, request)
    assert response.startswith(b"HTTP/1.1 200 "), response[:200]
    seen = body_of(response)
    assert seen["body"] == hidden.decode()
    assert ["Content-Length", str(len(hidden))] in seen["headers"]
    assert [request["path"] for request in proxied.echo.seen] == ["/base/v1/things"]


async def test_preserves_method_path_query_and_body(proxied: Proxied) -> None:
    """Method, path, query (as sent, unnormalised) and body arrive unchanged under the api-url's path."""
    async with (
        aiohttp.ClientSession() as session,
        session.put(
            URL(proxied.url + "/v1/a%2Fb/c?x=1&y=%20z&x=2", encoded=True),
            data=b"payload \x00\xff",
        ) as response,
    ):
        seen = await response.json()
    assert seen["method"] == "PUT"
    assert seen["path"] == "/base/v1/a%2Fb/c?x=1&y=%20z&x=2"
    assert seen["body"] == "payload \x00\xff"


async def test_chunked_upload_arrives_whole(proxied: Proxied) -> None:
    """A chunked (unknown-length) upload reaches the upstream byte for byte."""

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(50):
            yield bytes([i]) * 1000

    async with aiohttp.ClientSession() as session, session.post(proxied.url + "/echo", data=pieces()) as r:
        seen = await r.json()
    assert seen["body"].encode("latin-1") == b"".join(bytes([i]) * 1000 for i in range(50))
    assert ["Transfer-Encoding", "chunked"] in seen["headers"]


async def test_keep_alive_and_pipelined_requests_are_answered_in_order(proxied: Proxied) -> None:
    """Three pipelined requests on one connection get three answers, in order."""
    requests = b"".join(
        f"GET /n{i} HTTP/1.1\r\nHost: x\r\n{'Connection: close' if i == 2 else 'X: y'}\r\n\r\n".encode()
        for i in range(3)
    )
    answer = await raw(proxied.port, requests)
    assert answer.count(b"HTTP/1.1 200 OK") == 3
    assert answer.index(b"/base/n0") < answer.index(b"/base/n1") < answer.index(b"/base/n2")


async def test_head_and_no_content_answers_have_no_body(proxied: Proxied) -> None:
    """HEAD and 204 answers end at their head, and the connection stays usable."""
    requests = (
        b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /status/204 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    answer = await raw(proxied.port, requests)
    head, rest = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"Content-Length:" in head
    assert rest.startswith(b"HTTP/1.1 204 No Content\r\n")
    assert b"/base/after" in rest


async def test_redirects_are_handed_to_the_client(proxied: Proxied) -> None:
    """A redirect is not followed: the client gets the 302 and its Location."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(proxied.url + "/redirect", allow_redirects=False) as response,
    ):
        assert response.status == 302
        assert response.headers["Location"] == "https://elsewhere.example/"
    assert len(proxied.echo.seen) == 1


async def test_expect_continue_is_answered_by_the_proxy(proxied: Proxied) -> None:
    """A client that waits for 100 Continue gets it, and its body goes through."""
    answer = await raw(
        proxied.port,
        b"POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n"
        b"Connection: close\r\n\r\n",
        read_all=False,
    )
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    reader, writer = await asyncio.open_connection("127.0.0.1", proxied.port)
    writer.write(b"POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n")
    writer.write(b"Connection: close\r\n\r\n")
    assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"hello")
    final = await reader.read(-1)
    writer.close()
    assert body_of(final)["body"] == "hello"
    assert all(name.lower() != "expect" for name, _ in body_of(final)["headers"])


async def test_observer_counts_answers(proxied: Proxied) -> None:
    """Every answered request is counted with its status."""
    async with aiohttp.ClientSession() as session:
        for path in ("/a", "/status/204"):
            async with session.get(proxied.url + path) as response:
                await response.read()
    assert proxied.observed.codes == [200, 204]


async def test_each_request_on_a_kept_connection_sends_its_own_headers(proxied: Proxied) -> None:
    """Requests on one kept connection, each with other headers, reach the upstream with their own
    (the per-connection memo of the last head follows every change)."""
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        for headers in ({"X-A": "1"}, {"X-A": "1"}, {"X-B": "2", "Connection": "keep-alive, X-A"}, {}):
            async with session.get(proxied.url + "/v1/things", headers=headers) as response:
                seen = await response.json()
            names = {name.lower(): value for name, value in seen["headers"]}
            expected = {k.lower(): v for k, v in headers.items() if k in ("X-A", "X-B")}
            assert {k: v for k, v in names.items() if k in ("x-a", "x-b")} == expected
