"""The exchange on the wire: exactly what the upstream document says, and safe when it goes wrong."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tokenrelay.errors import ExchangeError, ExchangeTimeout
from tokenrelay.testing import FakeTokenService, loopback_certificates, make_jwt
from tokenrelay.tokens import sts

from ..support.core import API, Harness


async def test_request_matches_the_published_api(harness: Harness) -> None:
    """GET {auth_url}/sts/exchange?aud=&identity= with the OIDC token as bearer."""
    issued = await harness.fetch(API)
    assert issued.token == harness.service.issued[0]
    assert harness.service.seen_queries == [{"aud": API, "identity": "org/ci"}]
    assert harness.service.seen_id_tokens == [harness.id_token]


async def _serve(aiohttp_server: object, handler: object) -> str:
    app = web.Application()
    app.router.add_route("*", "/sts/exchange", handler)  # type: ignore[arg-type]
    app.router.add_route("*", "/elsewhere", handler)  # type: ignore[arg-type]
    server = await aiohttp_server(app)  # type: ignore[operator]
    return str(server.make_url("")).rstrip("/")


async def _exchange(url: str, timeout: float = 2.0) -> sts.Issued:
    async with aiohttp.ClientSession() as session:
        return await sts.exchange(session, url, API, "org/ci", "oidc-token-value", timeout=timeout)


async def test_redirect_is_not_followed(aiohttp_server: object) -> None:
    """A 302 from the token service is reported, and the OIDC token does not follow it."""
    hits: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        hits.append(request.path)
        raise web.HTTPFound("/elsewhere")

    url = await _serve(aiohttp_server, handler)
    with pytest.raises(ExchangeError, match="redirect.*not followed"):
        await _exchange(url)
    assert hits == ["/sts/exchange"]


async def test_oversized_answer_is_refused(aiohttp_server: object) -> None:
    """An answer over 1 MiB is cut off with an error instead of being read into memory."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(20):
            await response.write(b"x" * 65536)
        return response

    with pytest.raises(ExchangeError, match="1 MiB"):
        await _exchange(await _serve(aiohttp_server, handler))


async def test_garbage_answer_is_a_clear_error(aiohttp_server: object) -> None:
    """200 with a body that is not JSON says so."""

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="<html>proxy login</html>")

    with pytest.raises(ExchangeError, match="not JSON"):
        await _exchange(await _serve(aiohttp_server, handler))


async def test_answer_without_token_is_a_clear_error(aiohttp_server: object) -> None:
    """200 JSON without a token string says what was missing."""

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"access_token": "x"})

    with pytest.raises(ExchangeError, match='without a "token"'):
        await _exchange(await _serve(aiohttp_server, handler))


async def test_unknown_fields_are_ignored_and_expiry_used(aiohttp_server: object) -> None:
    """Extra fields do no harm; an ISO 8601 `expiry` is read."""

    async def handler(request: web.Request) -> web.Response:
        return web.json_response(
            {"token": make_jwt({}), "expiry": "2030-01-01T00:00:00.000Z", "tokenType": "Bearer"}
        )

    issued = await _exchange(await _serve(aiohttp_server, handler))
    assert issued.expiry == 1893456000.0


async def test_hanging_service_times_out(aiohttp_server: object) -> None:
    """A token service that never answers produces a timeout naming the flag to tune."""

    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.json_response({})

    with pytest.raises(ExchangeTimeout, match="--exchange-timeout"):
        await _exchange(await _serve(aiohttp_server, handler), timeout=0.3)


async def test_unreachable_service_is_reported(unused_tcp_port: int) -> None:
    """Nothing listening: the error names the address it tried and the setting, in the project's words
    (what the sidecar logs and answers on /v1/token), not aiohttp's ("ssl:default")."""
    url = f"http://127.0.0.1:{unused_tcp_port}"
    with pytest.raises(ExchangeError) as raised:
        await _exchange(url)
    assert str(raised.value) == (
        f"cannot reach the token service at {url}/sts/exchange (connection refused): "
        "check --auth-url (env TOKENRELAY_AUTH_URL)"
    )


async def test_an_untrusted_certificate_is_reported_as_such(aiohttp_server: object, tmp_path: Path) -> None:
    """A token service whose certificate no trusted CA signed: the error says the certificate does not
    verify, and why, rather than aiohttp's "Cannot connect to host ... ssl:True [...]"."""
    context = loopback_certificates(tmp_path).server_context()
    server = await aiohttp_server(FakeTokenService().app(), ssl=context)  # type: ignore[operator]
    url = f"https://127.0.0.1:{server.port}"
    with pytest.raises(ExchangeError) as raised:
        await _exchange(url)
    assert str(raised.value).startswith(
        f"cannot reach the token service at {url}/sts/exchange (its TLS certificate does not verify: "
    )
    assert "Cannot connect" not in str(raised.value)


async def test_refusal_without_aip193_body_reports_the_status(aiohttp_server: object) -> None:
    """A bare 502 from a load balancer is still an understandable, retryable error."""

    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=502, text="Bad Gateway")

    with pytest.raises(ExchangeError, match="HTTP 502") as caught:
        await _exchange(await _serve(aiohttp_server, handler))
    assert caught.value.retryable


async def test_upstream_message_is_scrubbed(aiohttp_server: object) -> None:
    """A token service that echoes the bearer in its error message does not get it into ours."""
    secret = make_jwt({"sub": "leak"})

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"code": 16, "message": f"bad token {secret}", "details": []}, status=401)

    with pytest.raises(ExchangeError) as caught:
        await _exchange(await _serve(aiohttp_server, handler))
    assert secret not in str(caught.value) and "[secure]" in str(caught.value)


async def test_opaque_oidc_token_quoted_back_is_removed(aiohttp_server: object) -> None:
    """An OIDC token that is not a JWT, echoed in a refusal, is still kept out of the error."""

    async def handler(request: web.Request) -> web.Response:
        bearer = request.headers["Authorization"].removeprefix("Bearer ")
        return web.json_response({"code": 16, "message": f"unknown token {bearer}"}, status=401)

    with pytest.raises(ExchangeError) as caught:
        await _exchange(await _serve(aiohttp_server, handler))
    assert "oidc-token-value" not in str(caught.value)
    assert "unknown token [secure]" in str(caught.value)
