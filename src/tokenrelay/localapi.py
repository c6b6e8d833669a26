"""The local API served over the Unix socket: the current token, liveness and readiness.

``GET /v1/token[?audience=AUD]`` answers ``{"token", "expireTime", "audience"}`` (or the bare token
with ``Accept: text/plain``); refusals are AIP-193 bodies like the upstream's, so one client code
path handles both.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from aiohttp import web

from . import aip193
from .aip193 import Code
from .errors import TokenUnavailable, UnknownAudience
from .token import Token, TokenSource

TOKENS = web.AppKey("tokens", TokenSource)
READY: web.AppKey[Callable[[], str | None]] = web.AppKey("ready")
COUNT: web.AppKey[Callable[[str], None]] = web.AppKey("count")
BODIES: web.AppKey[EncodedTokens] = web.AppKey("bodies")

_NO_STORE = {"Cache-Control": "no-store"}
# Whole header sets, so that aiohttp does not parse a content_type argument on every answer.
_JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store"}
_TEXT_HEADERS = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}


def error_response(status: int, code: Code, message: str, reason: str) -> web.Response:
    return web.Response(
        status=status,
        body=aip193.encode(code, message, reason),
        content_type="application/json",
        headers=_NO_STORE,
    )


async def get_token(request: web.Request) -> web.Response:
    app = request.app
    tokens = app[TOKENS]
    app[COUNT]("socket")
    # Parsing the query costs a tenth of a request: skip it when there is none.
    audience = (request.query_string and request.query.get("audience")) or tokens.audiences[0]
    token = tokens.current(audience)
    if token is None:
        try:
            token = await tokens.get(audience)
        except UnknownAudience as exc:
            return error_response(404, Code.NOT_FOUND, exc.message, "AUDIENCE_NOT_CONFIGURED")
        except TokenUnavailable as exc:
            return error_response(503, Code.UNAVAILABLE, exc.message, "TOKEN_UNAVAILABLE")
    if _wants_text(request.headers.get("Accept", "")):
        return web.Response(body=token.value.encode(), headers=_TEXT_HEADERS)
    return web.Response(body=app[BODIES].body(token), headers=_JSON_HEADERS)


class EncodedTokens:
    """The JSON answer for each audience's current token, encoded once per token, not per request."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[Token, bytes]] = {}

    def body(self, token: Token) -> bytes:
        cached = self._cache.get(token.audience)
        if cached is not None and cached[0] is token:
            return cached[1]
        payload = {"token": token.value, "expireTime": token.expire_time, "audience": token.audience}
        encoded = json.dumps(payload).encode()
        self._cache[token.audience] = (token, encoded)
        return encoded


def _wants_text(accept: str) -> bool:
    """True when the client asked for text/plain rather than JSON."""
    return "text/plain" in accept and "application/json" not in accept


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "serving"})


async def readyz(request: web.Request) -> web.Response:
    reason = request.app[READY]()
    if reason is None:
        return web.json_response({"status": "ready"})
    return error_response(503, Code.UNAVAILABLE, f"not ready: {reason}", "NOT_READY")


def health_routes(app: web.Application) -> None:
    """/healthz and /readyz, shared with the metrics port."""
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


def create_app(
    tokens: TokenSource, ready: Callable[[], str | None], count: Callable[[str], None] = lambda via: None
) -> web.Application:
    app = web.Application()
    app[TOKENS] = tokens
    app[READY] = ready
    app[COUNT] = count
    app[BODIES] = EncodedTokens()
    app.router.add_get("/v1/token", get_token)
    health_routes(app)
    return app
