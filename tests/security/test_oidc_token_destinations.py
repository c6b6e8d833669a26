"""The platform's OIDC token goes to the token service and nowhere else, and never comes back out."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tokenrelay.errors import TokenUnavailable
from tokenrelay.lite import aip193
from tokenrelay.sidecar import localapi
from tokenrelay.testing import FakeClock, FakeTokenService, make_jwt, refusal
from tokenrelay.tokens import idsources as idtoken
from tokenrelay.tokens.exchanger import Exchanger
from tokenrelay.tokens.provider import TokenProvider, TokenProviders

API = "https://api.example"


class Recorder:
    """A second loopback server that must never be reached: it counts every request."""

    def __init__(self) -> None:
        self.requests = 0
        self.saw_bearer = False

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._record)
        return app

    async def _record(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.saw_bearer = self.saw_bearer or "Authorization" in request.headers
        return web.json_response({"token": make_jwt({"jti": "stolen", "exp": 4_000_000_000})})


Served = tuple[FakeTokenService, TestServer]
Recorded = tuple[Recorder, TestServer]


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[Recorder, TestServer]]:
    recorder = Recorder()
    server = TestServer(recorder.app())
    await server.start_server()
    yield recorder, server
    await server.close()


@pytest.fixture
async def service() -> AsyncIterator[tuple[FakeTokenService, TestServer]]:
    fake = FakeTokenService()
    server = TestServer(fake.app())
    await server.start_server()
    yield fake, server
    await server.close()


@pytest.fixture
def oidc(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(path, value) of an OIDC token file."""
    value = make_jwt({"iss": "https://issuer.example", "sub": "ci", "exp": 4_000_000_000, "nonce": "x" * 8})
    path = tmp_path_factory.mktemp("oidc") / "token"
    path.write_text(value)
    return str(path), value


async def provider_for(
    session: aiohttp.ClientSession, server: TestServer, oidc_path: str
) -> tuple[TokenProvider, TokenProviders]:
    clock = FakeClock()
    exchanger = Exchanger(
        session, str(server.make_url("")), "groups/acme/identities/ci", idtoken.FileSource(oidc_path)
    )
    provider = TokenProvider(
        API, exchanger, clock=clock, wall=clock.wall, sleep=clock.sleep, rng=random.Random(1)
    )
    return provider, TokenProviders([provider])


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_redirect_from_the_token_service_is_not_followed(
    service: tuple[FakeTokenService, TestServer],
    recorder: tuple[Recorder, TestServer],
    oidc: tuple[str, str],
    status: int,
) -> None:
    """A token service that redirects elsewhere gets an error naming --auth-url; the other host is never
    contacted, so the OIDC token does not travel with the redirect."""
    fake, server = service
    other, other_server = recorder
    target = str(other_server.make_url("/sts/exchange"))

    async def redirect(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": target})

    fake.behaviour = redirect
    async with aiohttp.ClientSession() as session:
        provider, _ = await provider_for(session, server, oidc[0])
        with pytest.raises(TokenUnavailable, match="not followed") as caught:
            await provider.get()
    assert "--auth-url" in str(caught.value)
    assert other.requests == 0
    assert fake.seen_id_tokens == [oidc[1]]


async def test_oidc_token_reaches_only_the_token_service(
    service: Served, recorder: Recorded, oidc: tuple[str, str]
) -> None:
    """A successful exchange sends the OIDC token once, to the token service, as a bearer header; the
    token served on the socket is the exchanged one, never the OIDC token."""
    fake, server = service
    other, _ = recorder
    async with aiohttp.ClientSession() as session:
        _, providers = await provider_for(session, server, oidc[0])
        app = localapi.create_app(providers, providers.ready)
        async with TestClient(TestServer(app)) as local:
            response = await local.get("/v1/token")
            body = await response.text()
    assert response.status == 200
    assert oidc[1] not in body
    assert fake.seen_id_tokens == [oidc[1]]
    assert other.requests == 0


async def test_oidc_token_echoed_in_a_refusal_does_not_come_back_out(
    service: Served, oidc: tuple[str, str]
) -> None:
    """A token service that quotes the OIDC token in its error message: the socket's 503, /readyz and
    the provider's status carry the message with the token replaced by [secure]."""
    fake, server = service

    async def echo(request: web.Request) -> web.StreamResponse:
        bearer = request.headers["Authorization"]
        return refusal(aip193.Code.UNAUTHENTICATED, f"cannot verify {bearer}", 401, "BAD_TOKEN")

    fake.behaviour = echo
    async with aiohttp.ClientSession() as session:
        provider, providers = await provider_for(session, server, oidc[0])
        app = localapi.create_app(providers, providers.ready)
        async with TestClient(TestServer(app)) as local:
            token = await local.get("/v1/token")
            token_body = await token.text()
            ready = await local.get("/readyz")
            ready_body = await ready.text()
    assert (token.status, ready.status) == (503, 503)
    for text in (token_body, ready_body, str(provider.status())):
        assert oidc[1] not in text
        assert oidc[1].split(".")[1] not in text
        assert "[secure]" in text


OPAQUE = "opaque-oidc-0123456789abcdef"  # an OIDC token that is not a JWT: scrub() cannot spot it


@pytest.mark.parametrize("where", ["reason", "location", "location-encoded", "message"])
async def test_an_opaque_oidc_token_echoed_anywhere_in_a_refusal_does_not_come_back_out(
    service: Served, tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """Echoed in an ErrorInfo reason, a redirect's Location (plain or percent-encoded) or the message,
    an opaque OIDC token reaches neither the socket's 503, /readyz, the status nor the logs."""
    fake, server = service
    path = tmp_path / "token"
    path.write_text(OPAQUE)

    async def echo(request: web.Request) -> web.StreamResponse:
        bearer = request.headers["Authorization"].removeprefix("Bearer ")
        if where == "reason":
            return refusal(aip193.Code.UNAUTHENTICATED, "cannot verify", 401, f"BAD_{bearer}")
        if where == "message":
            return refusal(aip193.Code.UNAUTHENTICATED, f"cannot verify {bearer}", 401, "BAD")
        query = bearer.replace("-", "%2D") if where == "location-encoded" else bearer
        location = f"https://elsewhere.example/{query}/exchange?t={query}"
        return web.Response(status=302, headers={"Location": location})

    fake.behaviour = echo
    async with aiohttp.ClientSession() as session:
        provider, providers = await provider_for(session, server, str(path))
        app = localapi.create_app(providers, providers.ready)
        async with TestClient(TestServer(app)) as local:
            token = await local.get("/v1/token")
            token_body = await token.text()
            ready = await local.get("/readyz")
            ready_body = await ready.text()
    assert (token.status, ready.status) == (503, 503)
    assert fake.seen_id_tokens == [OPAQUE]
    for text in (token_body, ready_body, str(provider.status()), caplog.text):
        assert OPAQUE not in text
        assert OPAQUE.replace("-", "%2D") not in text
    assert "[secure]" in str(provider.status())


async def test_cr_lf_inside_the_oidc_token_is_reported_as_such(service: Served, tmp_path: Path) -> None:
    """A line break inside the OIDC token is refused before any request, named for what it is, then
    the file source's fix."""
    fake, server = service
    path = tmp_path / "token"
    path.write_bytes(b"eyJhbGciOi.eyJzdWIi\r\nX-Injected: 1.sig\n")
    async with aiohttp.ClientSession() as session:
        provider, _ = await provider_for(session, server, str(path))
        with pytest.raises(TokenUnavailable) as caught:
            await provider.get()
    assert str(caught.value) == (
        f"no token for audience {API}: the OIDC token in file {path} has a line break, another control "
        f"character or non-ASCII text inside it: not a token; {idtoken.FileSource(str(path)).fix()}"
    )
    assert fake.seen_id_tokens == []


async def test_a_non_ascii_retry_after_is_ignored_not_an_internal_error(
    service: Served, oidc: tuple[str, str]
) -> None:
    """A 503 with ``Retry-After: ²`` reads as the service's refusal, not as an internal ValueError."""
    fake, server = service

    async def busy(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, headers={"Retry-After": "²"})

    fake.behaviour = busy
    async with aiohttp.ClientSession() as session:
        provider, _ = await provider_for(session, server, oidc[0])
        with pytest.raises(TokenUnavailable) as caught:
            await provider.get()
    assert str(caught.value) == (
        f"no token for audience {API}: token service refused the exchange for audience {API}: HTTP 503"
    )
