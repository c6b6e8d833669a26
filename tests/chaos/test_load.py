"""Many clients on the socket while tokens rotate: every request answered, one exchange per rotation."""

from __future__ import annotations

import asyncio

import aiohttp

from tokenrelay.tokens.token import TokenState

from ..support.chaos import Relay, RelayFactory

REQUESTS = 10_000
CLIENTS = 64
ROTATIONS = 10
LIFETIME = 600.0


async def test_ten_thousand_socket_requests_one_exchange_per_rotation(relay_factory: RelayFactory) -> None:
    """64 concurrent clients make 10,000 token requests over the Unix socket while the clock crosses ten
    refresh points: all get 200, and the token service sees exactly one exchange per rotation."""
    relay: Relay = await relay_factory(lifetime=LIFETIME)
    statuses: dict[int, int] = {}
    served: set[str] = set()
    done = 0
    next_rotation = REQUESTS // (ROTATIONS + 1)
    rotations = 0
    connector = aiohttp.UnixConnector(path=relay.socket, limit=CLIENTS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(count: int) -> None:
            nonlocal done, next_rotation, rotations
            for _ in range(count):
                reply = await relay.get(session=session)
                statuses[reply.status] = statuses.get(reply.status, 0) + 1
                served.add(reply.id)
                done += 1
                if done >= next_rotation and rotations < ROTATIONS and settled():
                    # Past the refresh point (at most 55% of the life) but far from expiry.
                    rotations += 1
                    next_rotation += REQUESTS // (ROTATIONS + 1)
                    relay.clock.tick(0.6 * LIFETIME)

        def settled() -> bool:
            # the last rotation's exchange is over: its token is fresh
            token = relay.provider().token
            return token is not None and token.state(relay.clock()) is TokenState.FRESH

        share, extra = divmod(REQUESTS, CLIENTS)
        await asyncio.gather(*(client(share + (i < extra)) for i in range(CLIENTS)))
    await relay.settle()
    assert statuses == {200: REQUESTS}
    assert rotations == ROTATIONS
    assert relay.service.calls == ROTATIONS + 1
    assert served <= {f"t{i}" for i in range(1, ROTATIONS + 2)}
    assert len(served) >= ROTATIONS  # clients saw the rotations, not one frozen token
