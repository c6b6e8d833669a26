"""What a platform's token endpoint answers is read strictly, for every source that asks one over
HTTP: a redirect is never followed (the request carries the platform's credential), only a 200 is a
token, and a refusal's words are quoted without anything shaped like a token."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenrelay.errors import IdTokenError
from tokenrelay.testing import make_jwt
from tokenrelay.tokens.idsources import SOURCES, SourceInputs, explained

TOKEN = make_jwt({"sub": "job", "aud": "https://api.example.test", "exp": int(time.time()) + 3600})
SECRET = "platform-credential-0123456789"
# each HTTP source's environment, {URL} its endpoint's address
ENVIRONMENTS = {
    "azure": {"IDENTITY_ENDPOINT": "{URL}/msi", "IDENTITY_HEADER": SECRET},
    "github-actions": {
        "ACTIONS_ID_TOKEN_REQUEST_URL": "{URL}/idtoken?api-version=2.0",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": SECRET,
    },
    "azure-pipelines": {
        "SYSTEM_OIDCREQUESTURI": "{URL}/oidctoken",
        "SYSTEM_ACCESSTOKEN": SECRET,
        "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID": "c0ffee",
    },
    "gcp": {"GCE_METADATA_HOST": "{HOST}"},
}


@dataclass
class Endpoint:
    """A platform endpoint on loopback answering ``status`` with ``body``; ``/elsewhere`` answers a
    token to whoever comes, and records what they sent."""

    status: int = 200
    body: str = ""
    location: str = "/elsewhere"
    elsewhere: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/elsewhere", self._elsewhere)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        headers = {"Location": self.location} if 300 <= self.status < 400 else {}
        return web.Response(status=self.status, text=self.body or _token_body(request), headers=headers)

    async def _elsewhere(self, request: web.Request) -> web.StreamResponse:
        self.elsewhere.append(dict(request.headers))
        return web.Response(text=_token_body(request))


def _token_body(request: web.Request) -> str:
    """The token as each platform hands it: GCP's bare, the others' in their JSON field."""
    if request.path.startswith("/computeMetadata/"):
        return TOKEN
    return json.dumps({"access_token": TOKEN, "value": TOKEN, "oidcToken": TOKEN})


async def read(name: str, server: TestServer, http: aiohttp.ClientSession) -> str:
    """The source's read as a user would see it fail (``explained``), or the token it read."""
    url = str(server.make_url("")).rstrip("/")
    host = url.removeprefix("http://")
    env = {k: v.replace("{URL}", url).replace("{HOST}", host) for k, v in ENVIRONMENTS[name].items()}
    source = SOURCES[name].build(SourceInputs(environ=env, audience="https://api.example.test", session=http))
    try:
        return (await source.read()).value
    except IdTokenError as exc:
        return explained(source, exc).message


Serve = Callable[[web.Application], Awaitable[TestServer]]


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_a_redirect_is_never_followed(
    name: str, status: int, aiohttp_server: Serve, http: aiohttp.ClientSession
) -> None:
    """An endpoint that redirects is a failure naming the status: the address it points to is never
    asked, so the platform's credential never goes there."""
    endpoint = Endpoint(status=status, body="moved")
    server = await aiohttp_server(endpoint.app())
    endpoint.location = str(server.make_url("/elsewhere"))
    said = await read(name, server, http)
    assert f"answered HTTP {status}" in said, said
    assert endpoint.elsewhere == []


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
@pytest.mark.parametrize("status", [201, 202, 203, 206])
async def test_only_a_200_is_read_as_a_token(
    name: str, status: int, aiohttp_server: Serve, http: aiohttp.ClientSession
) -> None:
    """A 2xx other than 200 (accepted, partial, a proxy's non-authoritative copy) is not the
    platform's token, even with a token in its body: a failure naming the status."""
    server = await aiohttp_server(Endpoint(status=status).app())
    said = await read(name, server, http)
    assert said != TOKEN
    assert f"answered HTTP {status}" in said, said


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
async def test_a_refusal_is_quoted_without_what_is_shaped_like_a_token(
    name: str, aiohttp_server: Serve, http: aiohttp.ClientSession
) -> None:
    """A refusal that quotes a JWT or a bearer credential reaches the line in the platform's words,
    with [secure] in their place."""
    body = json.dumps({"message": f"token {TOKEN} refused; send Bearer abcdefghijklmnop instead"})
    server = await aiohttp_server(Endpoint(status=403, body=body).app())
    said = await read(name, server, http)
    assert "answered HTTP 403: token [secure] refused; send Bearer [secure] instead" in said, said
    assert TOKEN.split(".")[1] not in said and "abcdefghijklmnop" not in said


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
async def test_a_200_is_the_token(name: str, aiohttp_server: Serve, http: aiohttp.ClientSession) -> None:
    """The endpoint as the other cases bend it: a 200 with the token is read as the token."""
    server = await aiohttp_server(Endpoint().app())
    assert await read(name, server, http) == TOKEN
