"""An API token and its timing, on the monotonic clock.

A token's life is measured from the moment we received it, on the monotonic clock, with the length
taken from the token itself (``exp - iat``), never an assumed hour: a wall-clock jump or a skew
between us and the token service must not move a refresh. The wall-clock expiry is kept only to
tell users when the token expires.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

from .redact import fingerprint
from .timestamps import format_timestamp

# Below this much remaining life a token is not handed out: the caller could not finish a request.
# Short-lived tokens (tests, the emulator's --token-lifetime) get a tenth of their life instead.
MIN_USEFUL_SECONDS = 10.0
# /readyz wants every audience to hold a token with at least this much life left.
READY_SECONDS = 60.0


class TokenState(enum.Enum):
    """Where a token is in its life."""

    FRESH = "fresh"  # before its refresh point
    STALE = "stale"  # past its refresh point: still served, a refresh should be running
    EXPIRED = "expired"  # too close to (or past) its expiry to hand out


@dataclass(frozen=True, slots=True)
class Token:
    """An API token for one audience."""

    value: str = field(repr=False)
    audience: str
    received_at: float  # monotonic seconds
    lifetime: float  # seconds from receipt to expiry
    refresh_at: float  # monotonic seconds: when to start replacing it
    expire_wall: float  # Unix time of expiry, for display only

    @property
    def expires_at(self) -> float:
        """Monotonic time of expiry."""
        return self.received_at + self.lifetime

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.value)

    @property
    def expire_time(self) -> str:
        """The expiry in the upstream's timestamp form."""
        return format_timestamp(self.expire_wall)

    def remaining(self, now: float) -> float:
        return self.expires_at - now

    def state(self, now: float) -> TokenState:
        if self.remaining(now) < min(MIN_USEFUL_SECONDS, self.lifetime / 10):
            return TokenState.EXPIRED
        if now >= self.refresh_at:
            return TokenState.STALE
        return TokenState.FRESH


class TokenSource(Protocol):
    """What the local API, the proxy and the file sinks need from the token providers."""

    @property
    def audiences(self) -> tuple[str, ...]:
        """The configured audiences, the API's first."""
        ...

    def fresh(self, audience: str) -> Token | None:
        """The held token when it is before its refresh point, without awaiting; else None
        (then ``get`` does the rest). The fast path of every request."""
        ...

    async def get(self, audience: str) -> Token:
        """A valid token, at once when one is held; waits (bounded) only when none is.

        Raises UnknownAudience or TokenUnavailable.
        """
        ...

    async def reject(self, audience: str, token: Token) -> Token:
        """``token`` was refused upstream (a 401): a newer one, refreshing once for all callers."""
        ...
