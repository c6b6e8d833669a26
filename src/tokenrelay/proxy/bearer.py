"""The Authorization line the proxy injects: a memo of the header line for the current token.

The token itself comes from ``TokenSource.current``, the synchronous fast path the local API shares:
it hands out the held token without an ``await`` (which on the proxy's hot path would mean a task
per request) and starts the refresh when the token is stale. Only the encoding of the header line is
kept here, once per token. A 401 goes through ``reject``, which is single-flight with every other
caller.

A 401 forces a refresh at most once every REJECT_INTERVAL seconds: a revoked token heals at once,
but an upstream (or one endpoint) that refuses every token must not turn a stream of requests into
a stream of exchanges, log lines and sink rewrites. Within the interval, a 401 on the token the
forced refresh replaced still joins that refresh; a 401 on any other token goes to the client as is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..tokens.token import Token, TokenSource

log = logging.getLogger("tokenrelay.proxy")

REJECT_INTERVAL = 30.0


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
        self._rejected: Token | None = None  # the token the last 401-forced refresh replaced
        self._next_reject = float("-inf")  # clock time from which a 401 may force a refresh again
        self._quiet_until = float("-inf")  # the "401s pass through" warning is logged once per interval

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

    def may_reject(self, token: Token) -> bool:
        """Whether a 401 on ``token`` may be healed with ``reject`` (else it goes to the client)."""
        if self._joins(token):
            return True
        now = self._clock()
        if now >= self._next_reject:
            return True
        if now >= self._quiet_until:
            self._quiet_until = self._next_reject
            log.warning(
                "upstream refused a freshly refreshed token; its 401s go to clients unrefreshed",
                extra={"fingerprint": token.fingerprint, "seconds": round(self._next_reject - now, 1)},
            )
        return False

    async def reject(self, token: Token) -> tuple[Token, bytes]:
        """``token`` got a 401: a newer one (one refresh shared by every caller). Raises TokenUnavailable."""
        if not self._joins(token):
            self._rejected = token
            self._next_reject = self._clock() + REJECT_INTERVAL
            log.info("upstream refused the token; refreshing it", extra={"fingerprint": token.fingerprint})
        return self._remember(await self._tokens.reject(self._audience, token))

    def _joins(self, token: Token) -> bool:
        """A 401 on ``token`` needs no refresh of its own: one already replaced it, or a newer one is held."""
        rejected, held = self._rejected, self._token
        return (rejected is not None and token.value == rejected.value) or (
            held is not None and token.value != held.value
        )

    def _remember(self, token: Token) -> tuple[Token, bytes]:
        if token is not self._token:
            self._token = token
            self._line = header_line(token)
        return token, self._line
