"""The public test doubles in tokenrelay.testing behave as code built on tokenrelay relies on."""

from __future__ import annotations

import asyncio

import pytest

from tokenrelay.errors import UnknownAudience
from tokenrelay.testing import FakeClock, StaticTokenSource


async def test_settle_waits_until_every_loop_is_parked_on_the_clock() -> None:
    """settle() returns once each background loop has done what a tick woke it for and sleeps again."""
    clock = FakeClock()
    rounds: list[float] = []

    async def loop() -> None:
        while True:
            await asyncio.sleep(0)  # some work between naps
            rounds.append(clock())
            await clock.sleep(10)

    task = asyncio.ensure_future(loop())
    try:
        await clock.settle(1)
        clock.tick(10)
        await clock.settle(1)
        assert rounds == [1000.0, 1010.0]
    finally:
        task.cancel()


async def test_settle_names_its_timeout_when_a_loop_never_parks() -> None:
    """A loop that never sleeps on the clock fails settle() after the timeout, instead of hanging."""
    with pytest.raises(AssertionError, match="did not settle within 0.05s"):
        await FakeClock().settle(1, timeout=0.05)


async def test_static_token_source_serves_one_audience() -> None:
    """StaticTokenSource hands out its one token, counts rejections, and refuses other audiences."""
    tokens = StaticTokenSource("https://api.example", "tok")
    assert tokens.current("https://api.example") is tokens.token
    assert tokens.current("https://other.example") is None
    assert (await tokens.reject("https://api.example", tokens.token)).value == "tok"
    assert tokens.rejected == 1
    with pytest.raises(UnknownAudience):
        await tokens.get("https://other.example")
