"""The token service answers, but badly: the error is clear, the old token is served while it is valid,
and /readyz says why once it is about to run out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from tokenrelay.lite import aip193
from tokenrelay.testing import FakeTokenService, refusal

from ..support.chaos import CaptureHandler, Relay, assert_no_secret

LIFETIME = 600.0

Behaviour = Callable[[web.Request], Awaitable[web.StreamResponse | None]]


def garbage(service: FakeTokenService) -> Behaviour:
    async def behaviour(request: web.Request) -> web.StreamResponse:
        return web.Response(status=200, body=b"<html>maintenance</html>", content_type="text/html")

    return behaviour


def expired(service: FakeTokenService) -> Behaviour:
    async def behaviour(request: web.Request) -> web.StreamResponse:
        return web.json_response({"token": service.mint(request.query["aud"], lifetime=-30.0)})

    return behaviour


def unsafe(service: FakeTokenService) -> Behaviour:
    async def behaviour(request: web.Request) -> web.StreamResponse:
        return web.json_response({"token": service.mint(request.query["aud"]) + "\x0c$(id)"})

    return behaviour


def unauthenticated(service: FakeTokenService) -> Behaviour:
    async def behaviour(request: web.Request) -> web.StreamResponse:
        return refusal(
            aip193.Code.UNAUTHENTICATED, "OIDC token signature does not verify", 401, "BAD_SIGNATURE"
        )

    return behaviour


def denied(service: FakeTokenService) -> Behaviour:
    async def behaviour(request: web.Request) -> web.StreamResponse:
        return refusal(
            aip193.Code.PERMISSION_DENIED,
            "identity does not match the token's subject",
            403,
            "CLAIM_MISMATCH",
        )

    return behaviour


CASES = {
    "garbage": (garbage, "body that is not JSON"),
    "expired": (expired, "too short-lived"),
    "unsafe": (unsafe, "answered a token holding U+000C, which no bearer token may hold"),
    "401": (unauthenticated, "OIDC token signature does not verify (UNAUTHENTICATED, reason BAD_SIGNATURE"),
    "403": (denied, "identity does not match the token's subject (PERMISSION_DENIED, reason CLAIM_MISMATCH"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_bad_answer_keeps_old_token_and_readyz_says_why(relay: Relay, case: str) -> None:
    """Until the old token expires every request gets it; from a minute before, /readyz answers 503 with
    the service's own words; after expiry the socket's 503 carries them; recovery is automatic."""
    make, words = CASES[case]
    first = (await relay.get()).id
    relay.service.behaviour = make(relay.service)
    await relay.advance_to(1000.0 + LIFETIME - 90.0, step=10.0)
    assert relay.provider().status().consecutive_failures > 0
    reply = await relay.get()
    assert (reply.status, reply.id) == (200, first)
    assert (await relay.get("/readyz")).status == 200
    await relay.advance(40.0)
    ready = await relay.get("/readyz")
    assert ready.status == 503
    assert ready.body["code"] == aip193.Code.UNAVAILABLE
    assert words in ready.body["message"]
    assert (await relay.get()).id == first
    await relay.advance(60.0)
    gone = await relay.get()
    assert gone.status == 503
    assert words in gone.body["message"]
    relay.service.behaviour = None
    await relay.advance(40.0)
    back = await relay.get()
    assert back.status == 200
    assert back.id != first
    assert (await relay.get("/readyz")).status == 200


def test_log_check_catches_a_leak() -> None:
    """The log check fails a test whose logs contain a token, even only its payload."""
    token = "eyJhbGciOiJFUzI1NiJ9.eyJqdGkiOiJ0MSIsInN1YiI6InRlc3QifQ.c2ln"
    handler = CaptureHandler()
    with pytest.raises(pytest.fail.Exception, match="fingerprint"):
        assert_no_secret([("x", f"cut: {token.split('.')[1]}")], {token})
    assert_no_secret([("x", "nothing here")], {token})
    assert handler.lines == []
