"""The agent's budgets: requests per verified pod, exchanges per service account, and the token
service's refusals answered from memory (issue 28, item 9)."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from tokenrelay.lite import aip193
from tokenrelay.testing import refusal

from ..support.agent import AgentRig, Pod
from .conftest import RigFactory


async def _made_up(request: web.Request) -> web.StreamResponse | None:
    """The token service: audiences under made-up.example do not exist."""
    if request.query.get("aud", "").startswith("made-up"):
        return refusal(aip193.Code.INVALID_ARGUMENT, "no such audience", 400, "AUDIENCE_UNKNOWN")
    return None


def _made_up_calls(rig: AgentRig) -> int:
    return sum(q.get("aud", "").startswith("made-up") for q in rig.service.seen_queries)


async def test_one_pod_asking_too_often_gets_429_with_retry_after(rig_factory: RigFactory) -> None:
    """A pod past its burst (--pod-request-burst 10 at --max-requests-per-pod 5, however many
    connections it uses) gets 429 POD_RATE_LIMITED with a Retry-After; another pod is served; a
    second later the pod may ask again."""
    rig = await rig_factory(max_requests_per_pod=5, pod_request_burst=10, max_requests_per_connection=100_000)
    greedy = rig.start_pod(Pod("greedy-1", "web"))
    other = rig.start_pod(Pod("web-2", "web"))
    answers = await asyncio.gather(*(rig.ask(greedy) for _ in range(15)))
    assert sorted(a.status for a in answers) == [200] * 10 + [429] * 5
    limited = next(a for a in answers if a.status == 429)
    assert limited.reason == "POD_RATE_LIMITED"
    assert json.loads(limited.body)["code"] == aip193.Code.RESOURCE_EXHAUSTED
    assert b"--max-requests-per-pod" in limited.body
    assert int(limited.headers["Retry-After"]) >= 1
    assert (await rig.ask(other)).status == 200
    await rig.drift(1.0)
    assert (await rig.ask(greedy)).status == 200
    registry = rig.node_agent.registry
    assert registry.get_sample_value("tokenrelay_agent_refusals_total", {"reason": "POD_RATE_LIMITED"}) == 5


async def test_made_up_audiences_cannot_spend_the_nodes_exchange_budget(rig_factory: RigFactory) -> None:
    """One account asking for 30 made-up audiences at once starts at most its own
    --max-exchanges-per-account (2) in a second, and another account's first token is exchanged at
    once beside them, not after them."""
    rig = await rig_factory(
        max_exchanges_per_second=10, max_exchanges_per_account=2, max_requests_per_connection=100_000
    )
    rig.service.behaviour = _made_up
    hostile = rig.start_pod(Pod("hostile-1", "hostile"))
    honest = rig.start_pod(Pod("web-1", "web"))
    asks = [asyncio.ensure_future(rig.ask(hostile, audience=f"made-up-{i}.example")) for i in range(30)]
    await rig.drift(0.0)
    answer = await asyncio.wait_for(rig.ask(honest), timeout=10.0)
    assert answer.status == 200
    assert _made_up_calls(rig) <= 2
    await rig.drift(1.0)
    assert _made_up_calls(rig) <= 4
    for ask in asks:
        ask.cancel()
    await asyncio.gather(*asks, return_exceptions=True)


async def test_a_refusal_is_answered_from_memory_and_not_retried(rig_factory: RigFactory) -> None:
    """A key the service refused (a 4xx) is answered 403 in its words from memory for --refusal-ttl,
    with no exchange, in the background or on request; after it, the next request asks again."""
    rig = await rig_factory(refusal_ttl=120.0)
    rig.service.behaviour = _made_up
    pod = rig.start_pod(Pod("web-1", "web"))
    first = await rig.ask(pod, audience="made-up.example")
    assert (first.status, first.reason) == (403, "AUDIENCE_UNKNOWN")
    assert _made_up_calls(rig) == 1
    for _ in range(4):
        await rig.advance(25.0)  # beyond every backoff of a refused key (30 s at most)
        again = await rig.ask(pod, audience="made-up.example")
        assert (again.status, again.reason) == (403, "AUDIENCE_UNKNOWN")
        assert b"no such audience" in again.body
    assert _made_up_calls(rig) == 1
    await rig.advance(25.0)
    assert (await rig.ask(pod, audience="made-up.example")).status == 403
    assert _made_up_calls(rig) == 2
