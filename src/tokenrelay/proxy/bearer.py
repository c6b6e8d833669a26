"""The Authorization line the proxy injects: a memo of the header line for the current token.

The token itself comes from ``TokenSource.current``, the synchronous fast path the local API shares:
it hands out the held token without an ``await`` (which on the proxy's hot path would mean a task
per request) and starts the refresh when the token is stale. Only the encoding of the header line is
kept here, once per token. A 401 goes through ``reject``, which is single-flight with every other
caller.
"""

from __future__ import annotations

from ..token import Token, TokenSource


def header_line(token: Token) -> bytes:
    return b"Authorization: Bearer " + token.value.encode() + b"\r\n"


class Bearer:
    """The current token of one audience, with its ``Authorization`` header line."""

    def __init__(self, tokens: TokenSource, audience: str) -> None:
        self._tokens = tokens
        self._audience = audience
        self._token: Token | None = None
        self._line = b""

    def current(self) -> tuple[Token, bytes] | None:
        """The token to use and its line, without awaiting; None when none is valid (then ``await get()``)."""
        token = self._tokens.current(self._audience)
        if token is None:
            return None
        if token is not self._token:
            return self._remember(token)
        return token, self._line

    async def get(self) -> tuple[Token, bytes]:
        """Raises TokenUnavailable."""
        return self._remember(await self._tokens.get(self._audience))

    async def reject(self, token: Token) -> tuple[Token, bytes]:
        """``token`` got a 401: a newer one (one refresh shared by every caller). Raises TokenUnavailable."""
        return self._remember(await self._tokens.reject(self._audience, token))

    def _remember(self, token: Token) -> tuple[Token, bytes]:
        if token is not self._token:
            self._token = token
            self._line = header_line(token)
        return token, self._line
