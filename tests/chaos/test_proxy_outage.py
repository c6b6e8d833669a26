"""The token service goes down or hangs: clients of the proxy never notice while a token is valid."""

from __future__ import annotations

import asyncio

import pytest

from ..support.chaos import Api, CaptureHandler, RelayFactory, down_503, down_reset

LIFETIME = 600.0  # refresh at 270-300 s, expiry at 600 s


@pytest.mark.parametrize("down", [down_reset, down_503], ids=["reset", "503"])
async def test_outage_past_refresh_point_fails_no_proxied_request(
    relay_factory: RelayFactory, api: Api, down: object
) -> None:
    """Down from just after the first exchange until 90% of the token's life: every proxied request
    succeeds with the first token, which the upstream still accepts; after recovery the next refresh
    puts a new token on the proxied requests, with no 401 and no retry on the way."""
    relay = await relay_factory(lifetime=LIFETIME, api_url=api.url + "/base", proxy=True)
    first = await relay.proxied()
    assert (first.status, first.token) == (200, "t1")
    relay.service.behaviour = down  # type: ignore[assignment]
    statuses: list[int] = []
    served: set[str] = set()
    while relay.clock() < 1000.0 + 0.9 * LIFETIME:
        await relay.advance(10.0)
        for reply in await asyncio.gather(*(relay.proxied(f"/v1/things/{i}") for i in range(3))):
            statuses.append(reply.status)
            served.add(reply.token)
    assert set(statuses) == {200}
    assert served == {"t1"}
    assert len(relay.fetch.failed) >= 2  # it did try, and fail, during the outage
    relay.service.behaviour = None
    await relay.advance_to(1000.0 + LIFETIME - 5.0)  # a retry is due before the token runs out
    reply = await relay.proxied()
    assert (reply.status, reply.token) == (200, "t2")
    assert api.refused == []


async def test_hanging_service_proxied_requests_keep_the_old_token(
    relay_factory: RelayFactory, api: Api
) -> None:
    """A token service that accepts and never answers: proxied requests go on with the held token while
    the refreshes time out, and carry the next one once the service answers again."""
    relay = await relay_factory(
        lifetime=LIFETIME, exchange_timeout=0.2, api_url=api.url + "/base", proxy=True
    )
    assert (await relay.proxied()).token == "t1"
    relay.service.gate = asyncio.Event()
    tokens: set[str] = set()
    while relay.clock() < 1000.0 + 0.8 * LIFETIME:
        await relay.advance(20.0, step=10.0)
        reply = await relay.proxied()
        assert reply.status == 200, reply.reason
        tokens.add(reply.token)
    assert tokens == {"t1"}
    assert len(relay.fetch.failed) >= 1
    gate = relay.service.gate
    relay.service.gate = None
    gate.set()  # let the abandoned handlers finish too
    await relay.advance_to(1000.0 + LIFETIME - 5.0)
    reply = await relay.proxied()
    assert reply.status == 200
    assert reply.token not in ("", "t1")
    assert api.refused == []


async def test_no_token_yet_the_proxy_answers_503_and_forwards_nothing(
    relay_factory: RelayFactory, api: Api, no_secret_in_logs: CaptureHandler
) -> None:
    """With the token service down from the start, a proxied request gets the proxy's own 503
    TOKEN_UNAVAILABLE within --wait-timeout and the upstream sees nothing; once the service is back
    the same request gets through."""
    relay = await relay_factory(wait_timeout=0.2, api_url=api.url + "/base", proxy=True, behaviour=down_503)
    reply = await relay.proxied()
    assert (reply.status, reply.reason) == (503, "TOKEN_UNAVAILABLE")
    assert api.accepted == {}
    assert api.refused == []
    relay.service.behaviour = None
    await relay.advance(60.0)
    reply = await relay.proxied()
    assert (reply.status, reply.token) == (200, "t1")
    # the proxy's warning went through the secret check with every other record
    assert any(
        name == "tokenrelay.proxy" and "no token to forward" in text for name, text in no_secret_in_logs.lines
    )
