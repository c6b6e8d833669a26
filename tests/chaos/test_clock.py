"""The wall clock steps (NTP, a VM resumed): refreshes keep to the monotonic schedule."""

from __future__ import annotations

import pytest

from ..support.chaos import Relay, RelayFactory

LIFETIME = 3600.0  # refresh between 1620 s and 1980 s after receipt


@pytest.mark.parametrize("jump", [3600.0, -3600.0], ids=["forward", "back"])
async def test_wall_clock_jump_moves_no_refresh(relay_factory: RelayFactory, jump: float) -> None:
    """An hour's jump of the wall clock neither brings a refresh forward nor holds one back, and the
    token served stays the one in hand until its refresh point."""
    relay: Relay = await relay_factory(lifetime=LIFETIME)
    for round_ in range(2):
        received = relay.clock()
        token = relay.provider().token
        assert token is not None
        refresh_at = token.refresh_at
        assert received + 0.45 * LIFETIME <= refresh_at <= received + 0.55 * LIFETIME
        await relay.advance(60.0, step=30.0)
        relay.clock.jump_wall(jump)
        await relay.advance_to(refresh_at - 1.0, step=60.0)
        assert len(relay.service.issued) == round_ + 1
        assert (await relay.get()).id == f"t{round_ + 1}"
        await relay.advance(2.0, step=2.0)
        assert len(relay.service.issued) == round_ + 2
        assert (await relay.get()).id == f"t{round_ + 2}"
