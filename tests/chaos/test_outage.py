"""The token service goes down, flaps or hangs: clients of the socket never notice while a token is valid."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from aiohttp import web

from tokenrelay.lite import aip193
from tokenrelay.sidecar.localapi import SocketServer
from tokenrelay.testing import refusal
from tokenrelay.tokens.backoff import Backoff
from tokenrelay.tokens.provider import RETRY_SPREAD

from ..support.chaos import Relay, RelayFactory, down_503, down_reset

LIFETIME = 600.0  # refresh at 270-330 s, expiry at 600 s


@pytest.mark.parametrize("down", [down_reset, down_503], ids=["reset", "503"])
async def test_outage_past_refresh_point_fails_no_client_request(relay: Relay, down: object) -> None:
    """Down from just after the first exchange until 90% of the token's life: every socket request gets
    the first token, then the next refresh after recovery hands out a new one."""
    first = (await relay.get()).id
    relay.service.behaviour = down  # type: ignore[assignment]
    statuses: list[int] = []
    served: set[str] = set()
    while relay.clock() < 1000.0 + 0.9 * LIFETIME:
        await relay.advance(10.0)
        for _ in range(3):
            reply = await relay.get()
            statuses.append(reply.status)
            served.add(reply.id)
    assert set(statuses) == {200}
    assert served == {first}
    assert len(relay.fetch.failed) >= 2  # it did try, and fail, during the outage
    relay.service.behaviour = None
    await relay.advance_to(1000.0 + LIFETIME - 5.0)  # a retry is due before the token runs out
    reply = await relay.get()
    assert reply.status == 200
    assert reply.id != first
    assert (await relay.get("/readyz")).status == 200


async def test_sixty_percent_503_every_refresh_in_time(relay_factory: RelayFactory) -> None:
    """With 60% of exchanges refused, every token is replaced before it expires, and the retries keep
    to the backoff: each within its ceiling, a handful per refresh."""
    relay = await relay_factory(lifetime=LIFETIME)
    coin = random.Random(42)

    async def flaky(request: web.Request) -> web.StreamResponse | None:
        if coin.random() < 0.6:
            return refusal(aip193.Code.UNAVAILABLE, "try again", 503)
        return None

    relay.service.behaviour = flaky
    first_success = len(relay.service.issued)
    failures: list[int] = []
    end = relay.clock() + 6 * LIFETIME
    while relay.clock() < end:
        await relay.advance(10.0)
        reply = await relay.get()
        assert reply.status == 200, reply.body
        failures.append(relay.provider().status().consecutive_failures)
    rotations = len(relay.service.issued) - first_success
    assert rotations >= 9  # six lifetimes at about two refreshes each
    attempts = len(relay.fetch.started) - 1
    assert attempts < rotations * 6  # 2.5 expected per rotation at p=0.4
    assert max(failures) < 12

    # Each retry came within the ceiling after the failure before it: the exponential one, or half
    # the held token's remaining life (at most 55% of the lifetime after a refresh point).
    def ceiling(streak: int) -> float:
        return max(Backoff().ceiling(streak), RETRY_SPREAD * 0.55 * LIFETIME)

    streak = 0
    starts = relay.fetch.started
    failed = set(relay.fetch.failed)
    for before, after in itertools.pairwise(starts):
        if before in failed:
            streak += 1
            assert after - before <= ceiling(streak) + 10.0  # the test's own step
        else:
            streak = 0


async def test_hanging_service_times_out_and_recovers(relay_factory: RelayFactory) -> None:
    """A token service that accepts and never answers costs one --exchange-timeout per attempt: the old
    token is served meanwhile, no refresh stays stuck, and refreshes work once it answers again."""
    relay = await relay_factory(lifetime=LIFETIME, exchange_timeout=0.2)
    first = (await relay.get()).id
    relay.service.gate = asyncio.Event()
    await relay.advance_to(1000.0 + 0.56 * LIFETIME, step=10.0)
    assert relay.fetch.inflight == 0
    assert len(relay.fetch.failed) >= 1
    status = relay.provider().status()
    assert status.error is not None
    assert "did not answer within 0.2s" in status.error
    assert (await relay.get()).id == first
    gate = relay.service.gate
    relay.service.gate = None
    gate.set()  # let the abandoned handlers finish too
    await relay.advance_to(1000.0 + LIFETIME - 5.0)
    reply = await relay.get()
    assert reply.status == 200
    assert reply.id != first
    assert relay.provider().status().error is None


async def test_hang_before_first_token_bounds_the_wait(relay_factory: RelayFactory) -> None:
    """With no token yet and a hanging service, a socket client waits --wait-timeout, then gets a 503
    that says so, instead of hanging with the service."""
    relay = await relay_factory(exchange_timeout=5.0, wait_timeout=0.2, start=False)
    relay.service.gate = asyncio.Event()
    server = SocketServer(relay.settings, relay.providers, relay.providers.ready)
    await server.start()
    try:
        reply = await relay.get()
        assert reply.status == 503
        assert "--wait-timeout" in reply.body["message"]
        relay.service.gate.set()
        assert (await relay.get()).id == "t1"
    finally:
        relay.service.gate.set()
        await server.stop()
