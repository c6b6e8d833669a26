"""The local API's answer shape, the same from ``run``'s socket and the node agent: a token as JSON
``{"token", "expireTime", "audience"}``, or with ``Accept: text/plain`` the bare token and its
expiry in Unix seconds in a ``Token-Expires-At`` header; a refusal as an AIP-193 body like the
upstream's, so that one client code path handles both. Never cached by anyone on the way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from aiohttp import web

from ..lite import aip193
from ..lite.aip193 import Code
from ..lite.names import EXPIRES_HEADER
from ..tokens.token import Token

NO_STORE = {"Cache-Control": "no-store"}
# Whole header sets, so that aiohttp does not parse a content_type argument on every answer.
_JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store"}
_TEXT_HEADERS = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}


def error_response(status: int, code: Code, message: str, reason: str) -> web.Response:
    return web.Response(
        status=status,
        body=aip193.encode(code, message, reason),
        content_type="application/json",
        headers=NO_STORE,
    )


def render(token: Token, accept: str, bodies: EncodedTokens) -> tuple[bytes, Mapping[str, str]]:
    """The body and headers of a 200 carrying ``token``: JSON, or the bare token as text/plain with
    its expiry in a header when the client asked for that."""
    if _wants_text(accept):
        return token.value.encode(), {**_TEXT_HEADERS, EXPIRES_HEADER: str(int(token.expire_wall))}
    return bodies.body(token), _JSON_HEADERS


def _wants_text(accept: str) -> bool:
    """True when the client asked for text/plain rather than JSON."""
    return "text/plain" in accept and "application/json" not in accept


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
