"""The cluster's keys: a rotation is picked up, a stream of unknown key ids is not a stream of fetches."""

from __future__ import annotations

import json

import jwt

from tokenrelay.agent.jwks import MIN_REFETCH, ClusterKeys
from tokenrelay.testing import FakeClock

from ..support.agent import ClusterKey, Pod
from .conftest import RigFactory


async def test_unknown_kid_refetches_at_most_once_per_interval() -> None:
    """A token naming a new key makes the agent fetch the JWKS again and find it; more unknown kids
    within 30 s fetch nothing; after that, one more fetch."""
    clock = FakeClock()
    first, second = ClusterKey(), ClusterKey()
    served = [first.jwks]
    fetches = 0

    async def load() -> bytes:
        nonlocal fetches
        fetches += 1
        return served[-1]

    keys = ClusterKeys(load, clock=clock)
    await keys.refresh()
    rotated = json.loads(second.jwks)
    rotated["keys"][0]["kid"] = "rotated"
    served.append(json.dumps(rotated).encode())
    clock.tick(MIN_REFETCH)
    found = await keys.key("rotated")
    assert isinstance(found, jwt.PyJWK)
    assert fetches == 2
    for forged in range(20):
        assert await keys.key(f"forged-{forged}") is None
    assert fetches == 2
    clock.tick(MIN_REFETCH)
    assert await keys.key("forged-again") is None
    assert fetches == 3


async def test_a_retired_key_stops_being_trusted_within_the_refresh_period(rig_factory: RigFactory) -> None:
    """Once the cluster stops publishing a key, a token signed with it that the agent had already
    verified is refused (POD_TOKEN_SIGNATURE) after one --cluster-jwks-refresh period, with no
    unknown kid to prompt a re-read; a token of the new key is served."""
    rig = await rig_factory(cluster_jwks_refresh=60.0)
    pod = rig.start_pod(Pod("web-1", "web"))
    old = rig.key.token(pod, rig.auth_url)
    assert (await rig.ask(pod, token=old)).status == 200
    rig.key.rotate()
    assert (await rig.ask(pod, token=old)).status == 200  # not re-read yet
    await rig.advance(60.0)
    refused = await rig.ask(pod, token=old)
    assert (refused.status, refused.reason) == (401, "POD_TOKEN_SIGNATURE")
    assert (await rig.ask(pod, token=rig.key.token(pod, rig.auth_url))).status == 200
