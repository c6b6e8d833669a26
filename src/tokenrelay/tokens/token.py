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

from ..lite.lifetime import usable_margin
from ..lite.redact import fingerprint
from ..lite.timestamps import format_timestamp

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

    @property
    def margin(self) -> float:
        """Seconds before expiry at which the token stops being handed out (lifetime.usable_margin)."""
        return usable_margin(self.lifetime)

    def remaining(self, now: float) -> float:
        return self.expires_at - now

    def state(self, now: float) -> TokenState:
        if self.remaining(now) < self.margin:
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

    def current(self, audience: str) -> Token | None:
        """The held token while it may be handed out, without awaiting, starting its refresh when it
        is stale; else None (no valid token, or an unknown audience: then ``get`` does the rest).
        The fast path of every request, the local API's and the proxy's alike."""
        ...

    async def get(self, audience: str) -> Token:
        """A valid token, at once when one is held; waits (bounded) only when none is.

        Raises UnknownAudience or TokenUnavailable.
        """
        ...

    async def reject(self, audience: str, token: Token) -> Token:
        """``token`` was refused upstream (a 401): a newer one, refreshing once for all callers."""
        ...
