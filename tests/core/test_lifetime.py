"""The lifetime policy written once: the provider's schedule and the numbers others derive from it."""

from __future__ import annotations

import random

import pytest

from tokenrelay.helpers.kubelet import cache_seconds
from tokenrelay.lite.lifetime import DEFAULT_LIFETIME, EARLIEST_REFRESH, lifetime_of
from tokenrelay.testing import FakeClock, make_jwt
from tokenrelay.tokens.provider import TokenProvider
from tokenrelay.tokens.sts import Issued

WALL = 1_800_000_000.0


class Extreme(random.Random):
    """An rng whose jitter always lands at one end of its range."""

    def __init__(self, low: bool) -> None:
        super().__init__(0)
        self.low = low

    def uniform(self, a: float, b: float) -> float:
        return a if self.low else b


@pytest.mark.parametrize("low", [True, False])
async def test_kubelet_cache_ends_before_the_providers_earliest_refresh(low: bool) -> None:
    """kubelet's cacheDuration never outlives a token past the sidecar's refresh point, whatever the jitter:
    tied to the provider's real schedule, not to a copy of its constants."""
    clock = FakeClock(wall_start=WALL)
    lifetime = 3600

    async def fetch(audience: str) -> Issued:
        return Issued(make_jwt({"iat": int(WALL), "exp": int(WALL) + lifetime}))

    token = await TokenProvider("aud", fetch, clock=clock, wall=clock.wall, rng=Extreme(low)).get()
    refresh_after = token.refresh_at - token.received_at
    cached = cache_seconds(WALL, WALL + lifetime, WALL)
    assert cached <= refresh_after
    if low:  # the earliest refresh is exactly where kubelet's cache ends
        assert refresh_after == pytest.approx(EARLIEST_REFRESH * lifetime)
        assert cached == int(EARLIEST_REFRESH * lifetime)


@pytest.mark.parametrize(
    ("claims", "stated", "server_time", "expected"),
    [
        ({"iat": WALL, "exp": WALL + 1200}, None, None, 1200),  # exp - iat
        ({"iat": WALL - 100, "exp": WALL + 1200}, None, WALL, 1200),  # issuer's Date: 1200 left
        ({"iat": WALL, "exp": WALL + 1200}, None, WALL - 500, 1200),  # never more than exp - iat
        ({"exp": WALL + 900}, None, None, 900),  # no iat: from now
        ({"sub": "x"}, WALL + 600, None, 600),  # the service's stated expiry
        ({"sub": "x"}, None, None, DEFAULT_LIFETIME),  # nothing said: the documented hour
    ],
)
def test_lifetime_of_reads_the_token_then_the_service_then_the_default(
    claims: dict[str, float], stated: float | None, server_time: float | None, expected: float
) -> None:
    """One rule for a token's life, shared by the provider, the helpers and the emulator."""
    assert lifetime_of(make_jwt(claims), stated, WALL, server_time) == expected


def test_an_opaque_token_lives_the_stated_or_default_time() -> None:
    """A token that is not a JWT takes the service's expiry, else the documented hour."""
    assert lifetime_of("opaque", WALL + 60, WALL) == 60
    assert lifetime_of("opaque", None, WALL) == DEFAULT_LIFETIME
