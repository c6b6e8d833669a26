"""HTTP/2 clients on the proxy's port: httpx, curl, gRPC framing, the heal, the proxy's own answers."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote_to_bytes

import aiohttp
import httpx
import pytest
from h2.errors import ErrorCodes

from tokenrelay.proxy.bearer import REJECT_INTERVAL
from tokenrelay.testing import FakeClock, loopback_certificates
from tokenrelay.tokens.sts import Issued

from ..support.cancelling import cancel_as_it_wakes
from ..support.h2client import Answer, GoawayKeepsStreams, RawH2
from ..support.h2server import H2Echo, H2Proxied
from ..support.proxy import Echo, Observed, Proxied, ServerFactory, StartProxy, Tokens
from ..support.waiting import eventually


def h2client() -> httpx.AsyncClient:
    return httpx.AsyncClient(http1=False, http2=True, timeout=10)


async def test_httpx_http2_gets_the_token_and_the_upstreams_answer(h2proxied: H2Proxied) -> None:
    """httpx over h2c: the upstream sees the proxy's token (not the client's) and its own authority."""
    async with h2client() as client:
        response = await client.post(
            h2proxied.url + "/v1/things?page=2",
            content=b"hello",
            headers={"authorization": "Bearer not-this-one", "x-custom": "kept"},
        )
    assert response.http_version == "HTTP/2"
    assert response.status_code == 200
    seen = response.json()
    assert seen["tokens"] == ["t1"]  # the proxy's authorization, and only it
    assert seen["path"] == "/base/v1/things?page=2"
    assert seen["authority"] == f"127.0.0.1:{h2proxied.echo.port}"
    assert seen["size"] == 5
    assert ["x-custom", "kept"] in seen["headers"]
    assert h2proxied.observed.codes == [200]


async def test_debug_log_holds_no_header_block(
    h2proxied: H2Proxied, caplog: pytest.LogCaptureFixture
) -> None:
    """At debug level, hpack logs none of the headers or coded header blocks (the token, Huffman-coded)."""
    caplog.set_level(logging.DEBUG)
    async with h2client() as client:
        response = await client.get(h2proxied.url + "/v1/things")
    assert response.json()["token"] == "t1"
    assert [r.getMessage() for r in caplog.records if r.name.startswith("hpack")] == []


async def test_curl_http2_prior_knowledge(h2proxied: H2Proxied) -> None:
    """curl --http2-prior-knowledge gets the upstream's answer over HTTP/2, with the proxy's token."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    curl = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--fail", "--http2-prior-knowledge", "-o", "-", "-w", "\n%{http_version}",
        "-H", "Authorization: Bearer not-this-one", h2proxied.url + "/v1/things",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await curl.communicate()
    assert curl.returncode == 0
    body, version = out.rsplit(b"\n", 1)
    assert version == b"2"
    assert json.loads(body)["tokens"] == ["t1"]


GRPC = [(b"content-type", b"application/grpc"), (b"te", b"trailers")]
FRAME = b"\x00\x00\x00\x00\x05hello"  # one uncompressed gRPC message


async def test_grpc_call_passes_trailers_and_te(h2proxied: H2Proxied) -> None:
    """A gRPC call: te: trailers reaches the upstream, its grpc-status trailers reach the client."""
    client = await RawH2.open(h2proxied.proxy.port)
    sid = client.request(b"/pkg.Svc/Call", method=b"POST", body=FRAME, extra=GRPC)
    answer = await client.answer(sid)
    await client.close()
    assert answer.headers[b":status"] == b"200"
    assert answer.body == FRAME
    assert answer.trailers[b"grpc-status"] == b"0"
    assert answer.trailers[b"x-token"] == b"t1"
    assert ["te", "trailers"] in h2proxied.echo.seen[-1]["headers"]
    assert h2proxied.observed.grpc_statuses == [0]


@pytest.mark.parametrize("grpc", [False, True], ids=["http-401", "grpc-unauthenticated"])
async def test_refused_token_is_refreshed_and_the_call_retried(h2proxied: H2Proxied, grpc: bool) -> None:
    """A 401, or a trailers-only grpc-status 16, is healed once: a new token, the call sent again."""
    async with h2client() as http:
        await http.get(h2proxied.url + "/warm")  # the proxy holds t1 now
    h2proxied.echo.revoked.add("t1")
    h2proxied.echo.seen.clear()
    client = await RawH2.open(h2proxied.proxy.port)
    sid = client.request(b"/v1/x", method=b"POST", body=FRAME, extra=GRPC if grpc else [])
    answer = await client.answer(sid)
    await client.close()
    assert answer.headers[b":status"] == b"200"
    assert [seen["token"] for seen in h2proxied.echo.seen] == ["t1", "t2"]
    assert [seen["size"] for seen in h2proxied.echo.seen] == [len(FRAME), len(FRAME)]
    if grpc:
        assert answer.trailers[b"x-token"] == b"t2"
    else:
        assert json.loads(answer.body)["token"] == "t2"
    assert h2proxied.observed.retries == 1
    assert h2proxied.tokens.fetches == 2


@pytest.mark.parametrize("grpc", [False, True], ids=["http-401", "grpc-unauthenticated"])
async def test_a_stream_of_refusals_forces_one_refresh_per_interval(
    h2echo: H2Echo, start_proxy: StartProxy, grpc: bool
) -> None:
    """An HTTP/2 upstream refusing every token gets one forced refresh per 30 s, as on HTTP/1.1."""
    clock = FakeClock()
    tokens = Tokens()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(api_url, tokens.build(api_url), clock=clock)
    h2echo.revoked.update(f"t{i}" for i in range(1, 100))
    client = await RawH2.open(proxy.port)

    async def refused(count: int) -> int:
        answers = []
        for _ in range(count):
            sid = client.request(b"/v1/x", method=b"POST", body=FRAME, extra=GRPC if grpc else [])
            answers.append(await client.answer(sid))
        return sum(
            answer.headers.get(b"grpc-status" if grpc else b":status") == (b"16" if grpc else b"401")
            for answer in answers
        )

    assert await refused(20) == 20
    assert tokens.fetches == 2  # the first token, and the one 401-forced refresh
    clock.tick(REJECT_INTERVAL)
    assert await refused(20) == 20
    assert tokens.fetches == 3
    await client.close()
    assert [seen["token"] for seen in h2echo.seen[:3]] == ["t1", "t2", "t2"]


@dataclass
class SlowTokens(Tokens):
    """Each exchange takes a refresh interval on the proxy's clock: the bound on forced refreshes
    never holds a heal back, so only the stream's own once-only rule can."""

    clock: FakeClock = field(default_factory=FakeClock)

    async def fetch(self, audience: str) -> Issued:
        self.clock.tick(REJECT_INTERVAL)
        return await super().fetch(audience)


async def test_a_call_is_healed_once_however_often_it_is_refused(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """A call refused again after its heal goes to the client: it is sent twice, never more."""
    tokens = SlowTokens()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(api_url, tokens.build(api_url), clock=tokens.clock)
    h2echo.revoked.update(f"t{i}" for i in range(1, 10))  # t10 would be taken
    client = await RawH2.open(proxy.port)
    answer = await client.answer(client.request(b"/v1/x", method=b"POST", body=FRAME))
    await client.close()
    assert answer.headers[b":status"] == b"401"
    assert [seen["token"] for seen in h2echo.seen] == ["t1", "t2"]
    assert tokens.fetches == 2


@pytest.mark.parametrize("grpc", [False, True], ids=["http", "grpc"])
async def test_no_token_answers_unavailable(h2echo: H2Echo, start_proxy: StartProxy, grpc: bool) -> None:
    """No token: grpc-status 14 and why for a gRPC client, the AIP-193 503 for others; nothing forwarded."""
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(api_url, Tokens(fail=True).build(api_url))
    client = await RawH2.open(proxy.port)
    sid = client.request(b"/v1/x", method=b"POST", body=FRAME, extra=GRPC if grpc else [])
    answer = await client.answer(sid)
    await client.close()
    if grpc:
        assert answer.headers[b":status"] == b"200"
        assert answer.headers[b"grpc-status"] == b"14"  # trailers-only: in the one HEADERS frame
        assert b"token" in unquote_to_bytes(answer.headers[b"grpc-message"])
    else:
        assert answer.headers[b":status"] == b"503"
        assert json.loads(answer.body)["details"][0]["reason"] == "TOKEN_UNAVAILABLE"
    assert h2echo.seen == []


async def test_unreachable_and_slow_upstreams_give_grpc_14_and_4(
    h2echo: H2Echo, start_proxy: StartProxy
) -> None:
    """An upstream nobody answers at: grpc-status 14; one that does not answer in time: grpc-status 4."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    api_url = f"http://127.0.0.1:{dead}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url))
    client = await RawH2.open(proxy.port)
    answer = await client.answer(client.request(b"/v1/x", method=b"POST", body=FRAME, extra=GRPC))
    await client.close()
    assert answer.headers[b"grpc-status"] == b"14"
    assert b"cannot reach the upstream" in unquote_to_bytes(answer.headers[b"grpc-message"])

    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), upstream_timeout=0.2)
    client = await RawH2.open(proxy.port)
    answer = await client.answer(client.request(b"/slow", method=b"POST", body=FRAME, extra=GRPC))
    await client.close()
    assert answer.headers[b"grpc-status"] == b"4"
    assert h2echo.resets == 1  # the upstream stream was cancelled, not left running


async def test_http2_timeouts_keep_the_proxys_clock(h2echo: H2Echo, start_proxy: StartProxy) -> None:
    """The HTTP/2 side keeps time on the proxy's clock, as the HTTP/1.1 side does: a call the upstream
    leaves unanswered past the upstream timeout gets grpc-status 4, and a client connection left idle
    past the idle timeout its GOAWAY, when that clock says so and not before."""
    clock = FakeClock()
    api_url = f"http://127.0.0.1:{h2echo.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), clock=clock, upstream_timeout=60.0)
    client = await RawH2.open(proxy.port)
    sid = client.request(b"/slow", method=b"POST", body=FRAME, extra=GRPC)
    await eventually(lambda: any(seen["path"] == "/base/slow" for seen in h2echo.seen), "the call upstream")
    clock.tick(59.0)
    proxy.check_timeouts()
    clock.tick(2.0)
    proxy.check_timeouts()
    async with asyncio.timeout(5):  # the real clock has not moved a minute: only the proxy's has
        answer = await client.answer(sid)
    assert answer.headers[b"grpc-status"] == b"4"
    clock.tick(74.0)
    proxy.check_timeouts()
    assert not client.closed.is_set()
    clock.tick(2.0)
    proxy.check_timeouts()
    goaway = await client.wait_closed(timeout=5)
    await client.close()
    assert goaway is not None and goaway.error_code == ErrorCodes.NO_ERROR


async def test_not_an_open_relay(h2proxied: H2Proxied) -> None:
    """:authority never routes; CONNECT, extended CONNECT and absolute :path targets are refused."""
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    sid = client.h2.get_next_available_stream_id()
    client.h2.send_headers(
        sid,
        [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"evil.example"), (b":path", b"/x")],
        end_stream=True,
    )
    client.answers[sid] = Answer()
    client.flush()
    answer = await client.answer(sid)
    assert json.loads(answer.body)["authority"] == f"127.0.0.1:{h2proxied.echo.port}"
    assert h2proxied.echo.seen[-1]["scheme"] == "http"

    sid = client.h2.get_next_available_stream_id()
    client.h2.send_headers(sid, [(b":method", b"CONNECT"), (b":authority", b"evil.example:443")])
    client.answers[sid] = Answer()
    client.flush()
    assert (await client.answer(sid)).headers[b":status"] == b"405"
    sid = client.request(b"http://evil.example/x")
    assert (await client.answer(sid)).headers[b":status"] == b"400"
    await client.close()

    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    sid = client.h2.get_next_available_stream_id()
    client.h2.send_headers(
        sid,
        [
            (b":method", b"CONNECT"),
            (b":protocol", b"websocket"),
            (b":scheme", b"http"),
            (b":authority", b"evil.example"),
            (b":path", b"/chat"),
        ],
    )
    client.answers[sid] = Answer()
    client.flush()
    answer = await client.answer(sid)
    assert answer.headers[b":status"] == b"405"
    assert json.loads(answer.body)["details"][0]["reason"] == "METHOD_NOT_ALLOWED"
    await client.close()
    assert len(h2proxied.echo.seen) == 1


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        (b"GET /admin", b"/x", 400),
        (b"GET", b"/x HTTP/1.1", 400),
        (b"GET", b"/x\x7f", 400),
        (b"TRACE", b"/x", 405),
    ],
    ids=["method-with-a-space", "path-with-a-space", "path-with-del", "trace"],
)
async def test_methods_and_paths_an_http1_request_line_could_not_carry_are_refused(
    h2proxied: H2Proxied, method: bytes, path: bytes, status: int
) -> None:
    """A :method that is no token, a :path that is not visible ASCII, and TRACE (which would echo the
    token back) are refused as on HTTP/1.1: nothing reaches the upstream."""
    client = await RawH2.open(h2proxied.proxy.port, validate=False)
    sid = client.request(path, method=method)
    answer = await client.answer(sid)
    await client.close()
    assert answer.headers[b":status"] == b"%d" % status
    if status == 405:
        assert answer.headers[b"allow"].startswith(b"GET,")
        assert "echo the injected Authorization" in json.loads(answer.body)["message"]
    assert h2proxied.echo.seen == []


async def stopping_with_a_stream_in_flight(h2proxied: H2Proxied) -> tuple[RawH2, int, asyncio.Task[None]]:
    """A client's stream waiting at the upstream (``/slow``), the proxy stopping, its GOAWAY received."""
    client = await RawH2.open(h2proxied.proxy.port)
    sid = client.request(b"/slow")
    while not h2proxied.echo.seen:
        await asyncio.sleep(0.01)
    stopping = asyncio.create_task(h2proxied.proxy.stop())
    while client.goaway is None:
        client.changed.clear()
        await asyncio.wait_for(client.changed.wait(), 10)
    return client, sid, stopping


async def test_sigterm_drain_sends_goaway_and_finishes_the_stream(h2proxied: H2Proxied) -> None:
    """Stopping the proxy: GOAWAY at once, the stream in flight still gets its answer, then the close."""
    client, sid, stopping = await stopping_with_a_stream_in_flight(h2proxied)
    assert client.goaway is not None
    assert client.goaway.last_stream_id == sid
    assert client.goaway.error_code == 0
    h2proxied.echo.gate.set()
    answer = await client.answer(sid)
    assert json.loads(answer.body) == {"slow": "done"}
    await stopping
    await client.wait_closed()
    await client.close()


async def test_a_stop_cancelled_as_the_drain_ends_is_cancelled(h2proxied: H2Proxied) -> None:
    """The proxy's drain cancelled (the sidecar's own shutdown cut short) just as its last stream ends:
    the stop ends cancelled, as asked, instead of going on as if no cancel had come."""
    client, sid, stopping = await stopping_with_a_stream_in_flight(h2proxied)
    cancel_as_it_wakes(stopping)
    h2proxied.echo.gate.set()
    await client.answer(sid)
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert stopping.cancelled()
    await client.close()


async def test_http1_and_http2_clients_share_the_port(echo: Echo, start_proxy: StartProxy) -> None:
    """One --proxy-listen port: an HTTP/1.1 client and an HTTP/2 client, each served in its protocol."""
    upstream = H2Echo(http1_port=int(echo.url.rsplit(":", 1)[1]))
    await upstream.start()
    api_url = f"http://127.0.0.1:{upstream.port}/base"
    observed = Observed()
    proxy = await start_proxy(api_url, Tokens().build(api_url), observer=observed)
    url = f"http://127.0.0.1:{proxy.port}"
    async with aiohttp.ClientSession() as session, h2client() as http2:
        for _ in range(3):
            old, new = await asyncio.gather(session.get(url + "/v1/old"), http2.get(url + "/v1/new"))
            assert old.version == aiohttp.HttpVersion11
            assert (await old.json())["token"] == "t1"
            assert (await old.json())["path"] == "/base/v1/old"
            assert new.http_version == "HTTP/2"
            assert new.json()["token"] == "t1"
    await upstream.stop()
    assert observed.codes == [200] * 6
    assert observed.grpc_statuses == [None] * 3


async def test_https_upstream_speaks_h2_with_alpn(
    echo: Echo, aiohttp_server: ServerFactory, start_proxy: StartProxy, tmp_path: Path
) -> None:
    """An https upstream: HTTP/2 over TLS (ALPN h2) trusted through --upstream-ca; refusals say why."""
    certificates = loopback_certificates(tmp_path)
    ca_file = certificates.ca
    context = certificates.server_context(["h2"])
    upstream = H2Echo()
    await upstream.start(context)
    api_url = f"https://127.0.0.1:{upstream.port}/base"
    trusted = await start_proxy(api_url, Tokens().build(api_url), upstream_ca=ca_file)
    untrusted = await start_proxy(api_url, Tokens().build(api_url))
    async with h2client() as http2:
        response = await http2.get(f"http://127.0.0.1:{trusted.port}/v1/x")
        assert response.json()["token"] == "t1"
        assert response.json()["scheme"] == "https"
    client = await RawH2.open(untrusted.port)
    answer = await client.answer(client.request(b"/v1/x", method=b"POST", body=FRAME, extra=GRPC))
    await client.close()
    assert answer.headers[b"grpc-status"] == b"14"
    assert b"--upstream-ca" in unquote_to_bytes(answer.headers[b"grpc-message"])
    await upstream.stop()

    context.set_alpn_protocols(["http/1.1"])  # an upstream that speaks only HTTP/1.1 over TLS
    server = await aiohttp_server(echo.app(), ssl=context)
    api_url = f"https://127.0.0.1:{server.port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), upstream_ca=ca_file)
    client = await RawH2.open(proxy.port)
    answer = await client.answer(client.request(b"/v1/x", method=b"POST", body=FRAME, extra=GRPC))
    await client.close()
    assert answer.headers[b"grpc-status"] == b"14"
    assert b"does not speak HTTP/2" in unquote_to_bytes(answer.headers[b"grpc-message"])


LAZY = """
import asyncio, json, sys, time
from aiohttp import web
from tokenrelay.tokens.provider import TokenProvider, TokenProviders
from tokenrelay.proxy import ProxyServer
from tokenrelay.tokens.sts import Issued
from tokenrelay.testing import make_jwt

async def fetch(audience):
    now = int(time.time())
    return Issued(make_jwt({"jti": "t1", "aud": audience, "iat": now, "exp": now + 3600}))

async def main():
    app = web.Application()
    app.router.add_get("/x", lambda request: web.Response(text="ok"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    api = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    proxy = ProxyServer(api, TokenProviders([TokenProvider(api, fetch)]), listen=("127.0.0.1", 0))
    await proxy.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"GET /x HTTP/1.1\\r\\nHost: p\\r\\n\\r\\n")
    http1 = await reader.readuntil(b"ok")
    after_http1 = "h2" in sys.modules
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + bytes.fromhex("000000040000000000"))
    settings = await reader.readexactly(9)
    print(json.dumps([http1.startswith(b"HTTP/1.1 200"), after_http1, settings[3] == 4, "h2" in sys.modules]))

asyncio.run(main())
"""


async def test_http1_path_does_not_import_h2() -> None:
    """HTTP/1.1 traffic never loads h2; the first HTTP/2 client does (the proxy answers its SETTINGS)."""
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", LAZY, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert json.loads(out) == [True, False, True, True]


async def test_client_goaway_lets_its_streams_finish(h2proxied: H2Proxied) -> None:
    """A client that sends GOAWAY (NO_ERROR) still gets the answers of its streams in flight."""
    client = await RawH2.open(h2proxied.proxy.port)
    sid = client.request(b"/slow")
    while not h2proxied.echo.seen:
        await asyncio.sleep(0.01)
    client.h2.close_connection()
    client.h2.state_machine = GoawayKeepsStreams()  # h2 would refuse the answer after its own GOAWAY
    client.flush()
    h2proxied.echo.gate.set()
    answer = await client.answer(sid)
    assert json.loads(answer.body) == {"slow": "done"}
    await client.wait_closed()
    await client.close()


async def test_http1_only_upstream_is_named_as_such(proxied: Proxied) -> None:
    """An http:// upstream that speaks only HTTP/1.1: an HTTP/2 call gets grpc-status 14 saying so."""
    client = await RawH2.open(proxied.port)
    answer = await client.answer(client.request(b"/v1/x", method=b"POST", body=FRAME, extra=GRPC))
    await client.close()
    assert answer.headers[b"grpc-status"] == b"14"
    assert b"does not speak HTTP/2" in unquote_to_bytes(answer.headers[b"grpc-message"])


async def test_streams_beyond_one_upstream_connection_open_another(h2proxied: H2Proxied) -> None:
    """Two clients with 100 streams each in flight: all 200 reach the upstream (on a second connection)."""
    clients = [await RawH2.open(h2proxied.proxy.port) for _ in range(2)]
    sids = [[client.request(b"/slow") for _ in range(100)] for client in clients]
    async with asyncio.timeout(20):
        while len(h2proxied.echo.seen) < 200:
            await asyncio.sleep(0.01)
    h2proxied.echo.gate.set()
    for client, streams in zip(clients, sids, strict=True):
        for sid in streams:
            assert json.loads((await client.answer(sid)).body) == {"slow": "done"}
        await client.close()
    assert h2proxied.echo.connections == 2


async def test_http2_answers_lose_hop_by_hop_fields_as_http1_answers_do(h2proxied: H2Proxied) -> None:
    """Proxy-* and Trailer fields of an upstream's HTTP/2 answer do not reach the client, as on HTTP/1.1;
    other fields do."""
    client = await RawH2.open(h2proxied.proxy.port)
    answer = await client.answer(client.request(b"/hop"))
    assert answer.headers[b":status"] == b"204"
    assert answer.headers[b"x-kept"] == b"1"
    assert b"proxy-status" not in answer.headers
    assert b"trailer" not in answer.headers
