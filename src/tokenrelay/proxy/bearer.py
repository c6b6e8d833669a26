"""The Authorization the proxy injects: a memo of the header field for the current token, in the
form each front end writes (an HTTP/1.1 line, an HTTP/2 field value).

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
from typing import NamedTuple

from ..tokens.token import Token, TokenSource

log = logging.getLogger("tokenrelay.proxy")

REJECT_INTERVAL = 30.0


def header_line(token: Token) -> bytes:
    return b"Authorization: " + field_value(token) + b"\r\n"


def field_value(token: Token) -> bytes:
    return b"Bearer " + token.value.encode()


class Held(NamedTuple):
    """A token and its Authorization field, encoded once per token."""

    token: Token
    line: bytes  # HTTP/1.1: "Authorization: Bearer ...\r\n"
    value: bytes  # HTTP/2: the field value, "Bearer ..."

    def __repr__(self) -> str:
        return f"Held(fingerprint={self.token.fingerprint!r})"  # never the token


class Bearer:
    """The current token of one audience, with its ``Authorization`` field."""

    def __init__(
        self, tokens: TokenSource, audience: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._tokens = tokens
        self._audience = audience
        self._clock = clock
        self._held: Held | None = None
        self._rejected: Token | None = None  # the token the last 401-forced refresh replaced
        self._next_reject = float("-inf")  # clock time from which a 401 may force a refresh again
        self._quiet_until = float("-inf")  # the "401s pass through" warning is logged once per interval

    def current(self) -> Held | None:
        """The token and its field, without awaiting; None when none is valid (then ``await get()``)."""
        token = self._tokens.current(self._audience)
        if token is None:
            return None
        held = self._held
        return held if held is not None and held.token is token else self._remember(token)

    async def get(self) -> Held:
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

    async def reject(self, token: Token) -> Held:
        """``token`` got a 401: a newer one (one refresh shared by every caller). Raises TokenUnavailable."""
        if not self._joins(token):
            self._rejected = token
            self._next_reject = self._clock() + REJECT_INTERVAL
            log.info("upstream refused the token; refreshing it", extra={"fingerprint": token.fingerprint})
        return self._remember(await self._tokens.reject(self._audience, token))

    def _joins(self, token: Token) -> bool:
        """A 401 on ``token`` needs no refresh of its own: one already replaced it, or a newer one is held."""
        rejected, held = self._rejected, self._held
        return (rejected is not None and token.value == rejected.value) or (
            held is not None and token.value != held.token.value
        )

    def _remember(self, token: Token) -> Held:
        held = self._held
        if held is None or held.token is not token:
            held = self._held = Held(token, header_line(token), field_value(token))
        return held
