"""The chaos suite's pieces: a relay built by daemon.build on a FakeClock, the upstream behind its
proxy, the secrets the log check looks for, and scripted token-service failures.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tokenrelay.errors import TokenRelayError
from tokenrelay.lite import aip193
from tokenrelay.lite.jwtclaims import numeric_claim, unverified_claims
from tokenrelay.lite.redact import fingerprint
from tokenrelay.proxy import ProxyServer
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import FakeClock, FakeTokenService, jti, make_jwt, refusal
from tokenrelay.tokens.provider import TokenProvider, TokenProviders
from tokenrelay.tokens.sts import Issued
from tokenrelay.tokens.token import Token

API = "https://api.example"


IDENTITY = "groups/acme/identities/ci"


# The token service's clock runs far ahead of real time, so that the real Date header aiohttp adds
# never looks later than a token's iat (the provider takes the earlier of the two as "now").
SERVICE_AHEAD = 10 * 86400.0


SETTLE_SECONDS = 10.0  # real time allowed for one step's exchanges to finish


class Secrets:
    """Every secret a test handled, for the log check."""

    def __init__(self) -> None:
        self.services: list[FakeTokenService] = []
        self.extra: list[str] = []

    def values(self) -> set[str]:
        found = set(self.extra)
        for service in self.services:
            found.update(service.issued)
            found.update(t for t in service.seen_id_tokens if t)
        return found


class CaptureHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[str, str]] = []  # (logger, raw rendering)
        self._plain = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.getMessage()} {vars(record)!r}"
        if record.exc_info:
            text += self._plain.formatException(record.exc_info)
        if record.stack_info:
            text += record.stack_info
        self.lines.append((record.name, text))


def assert_no_secret(lines: list[tuple[str, str]], values: set[str]) -> None:
    # Search for each secret and for its payload alone (a truncated token is still a leak).
    needles = {v: v for v in values}
    needles.update({v.split(".")[1]: v for v in values if v.count(".") == 2 and len(v.split(".")[1]) > 16})
    for logger, text in lines:
        for needle, secret in needles.items():
            if needle in text:
                pytest.fail(
                    f"a secret (fingerprint {fingerprint(secret)}) appears in a log record of {logger}"
                )


async def down_reset(request: web.Request) -> web.StreamResponse:
    """A dead backend behind a load balancer: the connection closes with no answer."""
    assert request.transport is not None
    request.transport.close()
    return web.Response(status=503)


async def down_503(request: web.Request) -> web.StreamResponse:
    return refusal(aip193.Code.UNAVAILABLE, "token service is down", 503)


class Api:
    """The upstream behind the proxy, checking bearers as the real API does.

    A bearer is accepted when one of the test's token services issued it and its ``exp`` is still
    ahead on that service's clock; anything else gets a 401. Every answer says which token (by jti)
    it saw, so tests compare ids, never tokens.
    """

    def __init__(self, secrets: Secrets) -> None:
        self._secrets = secrets
        self.accepted: dict[str, int] = {}  # jti -> requests
        self.refused: list[str] = []  # why, without the token
        self.url = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    def check(self, authorization: str) -> str:
        """The token's jti when it is acceptable; raises ValueError saying why not."""
        token = authorization.removeprefix("Bearer ")
        if token == authorization:
            raise ValueError("no bearer token")
        for service in self._secrets.services:
            if token in service.issued:
                exp = numeric_claim(unverified_claims(token) or {}, "exp")
                if exp is None or exp <= service.wall():
                    raise ValueError(f"token {jti(token)} has expired")
                return jti(token)
        raise ValueError(f"token {fingerprint(token)} was never issued")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            seen = self.check(request.headers.get("Authorization", ""))
        except ValueError as exc:
            self.refused.append(str(exc))
            return refusal(aip193.Code.UNAUTHENTICATED, str(exc), 401, "TOKEN_REFUSED")
        self.accepted[seen] = self.accepted.get(seen, 0) + 1
        return web.json_response({"token": seen, "path": request.raw_path})


def oidc_token(
    clock: FakeClock, lifetime: float = 86400.0, sub: str = "system:serviceaccount:ci:runner"
) -> str:
    now = clock.wall()
    return make_jwt(
        {"iss": "https://issuer.example", "sub": sub, "iat": int(now), "exp": int(now + lifetime)}
    )


class InFlight:
    """Hears every exchange the providers make: each attempt's start time and every failure's time,
    on the relay's clock; ``inflight`` counts the exchanges under way."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self.providers: TokenProviders | None = None  # set once built
        self.started: list[float] = []
        self.failed: list[float] = []

    @property
    def inflight(self) -> int:
        providers = self.providers
        if providers is None:
            return 0
        return sum(providers.provider(audience).exchanging for audience in providers.audiences)

    def observer(self) -> _Heard:
        """The provider Observer that feeds ``started`` and ``failed``."""
        return _Heard(self)


class _Heard:
    def __init__(self, flight: InFlight) -> None:
        self._flight = flight

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
        self._flight.started.append(self._flight._clock() - duration)

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
        now = self._flight._clock()
        self._flight.started.append(now - duration)
        self._flight.failed.append(now)


@dataclass
class Reply:
    status: int
    body: dict[str, Any] = field(repr=False)  # holds the token: kept out of assertion output

    @property
    def id(self) -> str:
        """The served token's jti (t1, t2, ...), or "": what tests compare, so no token is printed."""
        token = self.body.get("token")
        return jti(token) if isinstance(token, str) else ""


@dataclass
class Proxied:
    """What a client of the proxy got: the status, and which token the upstream saw (its jti)."""

    status: int
    token: str
    reason: str  # the AIP-193 reason of a refusal, or ""


@dataclass
class Relay:
    clock: FakeClock
    service: FakeTokenService
    fetch: InFlight
    providers: TokenProviders
    settings: Settings
    id_token_file: Path
    session: aiohttp.ClientSession
    proxy_session: aiohttp.ClientSession
    secrets: Secrets
    proxy: ProxyServer | None = field(default=None, repr=False)

    @property
    def socket(self) -> str:
        return self.settings.socket

    def provider(self, audience: str = API) -> TokenProvider:
        return self.providers.provider(audience)

    async def settle(self) -> None:
        """Wait (real time, bounded) until no exchange is under way and every schedule sleeps."""
        await self.clock.settle(
            len(self.providers.audiences), busy=lambda: self.fetch.inflight > 0, timeout=SETTLE_SECONDS
        )

    async def advance(self, seconds: float, step: float = 5.0) -> None:
        """Move the fake clock by ``seconds``, settling after every ``step``."""
        remaining = seconds
        while remaining > 1e-9:
            delta = min(step, remaining)
            self.clock.tick(delta)
            remaining -= delta
            await self.settle()

    async def advance_to(self, moment: float, step: float = 5.0) -> None:
        await self.advance(moment - self.clock(), step)

    async def get(self, path: str = "/v1/token", session: aiohttp.ClientSession | None = None) -> Reply:
        """One request to the local API over the Unix socket."""
        async with (session or self.session).get(f"http://tokenrelay{path}") as response:
            return Reply(response.status, await response.json(content_type=None))

    async def proxied(
        self, path: str = "/v1/things", session: aiohttp.ClientSession | None = None
    ) -> Proxied:
        """One request through the proxy to the Api upstream."""
        assert self.proxy is not None, "build the relay with proxy=True"
        url = f"http://127.0.0.1:{self.proxy.port}{path}"
        async with (session or self.proxy_session).get(url) as response:
            body = await response.json(content_type=None)
        details = body.get("details") or [{}]
        return Proxied(response.status, body.get("token", ""), details[0].get("reason", ""))

    def id_token(self, lifetime: float = 86400.0, sub: str = "system:serviceaccount:ci") -> str:
        """A new OIDC token, registered with the log check."""
        value = oidc_token(self.clock, lifetime, sub)
        self.secrets.extra.append(value)
        return value

    def write_id_token(self, value: str) -> None:
        self.id_token_file.write_text(value)


RelayFactory = Callable[..., Awaitable[Relay]]
