"""The Authorization line the proxy injects, asked of the token source only when it may have changed.

Asking the TokenSource costs an ``await``, which on the proxy's hot path would mean a task per
request. The provider hands out the same token until its refresh point, so the proxy keeps that
token and its encoded header line until then, and afterwards asks again at most once a second
(the provider refreshes in the background meanwhile). A 401 goes through ``reject``, which is
single-flight with every other caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..token import MIN_USEFUL_SECONDS, Token, TokenSource, TokenState

RECHECK_SECONDS = 1.0


def header_line(token: Token) -> bytes:
    return b"Authorization: Bearer " + token.value.encode() + b"\r\n"


class Bearer:
    """The current token of one audience, with its ``Authorization`` header line."""

    def __init__(
        self, tokens: TokenSource, audience: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._tokens = tokens
        self._audience = audience
        self._clock = clock
        self._token: Token | None = None
        self._line = b""
        self._until = 0.0  # clock time until which _token is used without asking

    def current(self) -> tuple[Token, bytes] | None:
        """The held token and its line while it needs no asking, else None (then ``await get()``)."""
        if self._token is not None and self._clock() < self._until:
            return self._token, self._line
        return None

    async def get(self) -> tuple[Token, bytes]:
        """Raises TokenUnavailable."""
        return self._remember(await self._tokens.get(self._audience))

    async def reject(self, token: Token) -> tuple[Token, bytes]:
        """``token`` got a 401: a newer one (one refresh shared by every caller). Raises TokenUnavailable."""
        return self._remember(await self._tokens.reject(self._audience, token))

    def _remember(self, token: Token) -> tuple[Token, bytes]:
        now = self._clock()
        if token is not self._token:
            self._token = token
            self._line = header_line(token)
        if token.state(now) is TokenState.FRESH:
            self._until = token.refresh_at
        else:
            margin = min(MIN_USEFUL_SECONDS, token.lifetime / 10)
            self._until = min(now + RECHECK_SECONDS, token.expires_at - margin)
        return token, self._line
