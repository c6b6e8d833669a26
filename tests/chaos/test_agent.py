"""The sidecar's chaos, against the node agent: the token service down, slow, refusing or
overloaded, pods coming and going; on a fake clock, through the agent's real socket, with every
request's pod token really verified."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from tokenrelay.lite import aip193
from tokenrelay.testing import jti, refusal

from ..support.agent import AgentRig, Pod, start_rig
from ..support.chaos import Secrets, down_503, down_reset
from ..support.paths import short_dir

LIFETIME = 600.0  # refresh at 270-300 s, expiry at 600 s
RigFactory = Callable[..., Awaitable[AgentRig]]


@pytest.fixture
async def rig_factory(secrets: Secrets) -> AsyncIterator[RigFactory]:
    cleanups: list[Any] = []

    async def build(**settings: Any) -> AgentRig:
        settings.setdefault("max_requests_per_connection", 100_000)
        rig, done = await start_rig(short_dir(), lifetime=LIFETIME, **settings)
        secrets.services.append(rig.service)
        cleanups.extend(done)
        return rig

    yield build
    for cleanup in cleanups:
        with contextlib.suppress(Exception):
            await cleanup()


@pytest.fixture
async def rig(rig_factory: RigFactory) -> AgentRig:
    return await rig_factory()


async def test_outage_keeps_serving_the_held_token_then_recovers(rig: AgentRig) -> None:
    """Down (reset or 503) from just after the first exchange to 90% of the token's life: every pod
    keeps getting the held token; after recovery a retry replaces it before it expires."""
    pods = [rig.start_pod(Pod(f"web-{i}", "web")) for i in range(3)]
    first = await rig.ask(pods[0])
    assert first.status == 200
    for index, down in enumerate((down_reset, down_503) * 10):
        rig.service.behaviour = down
        await rig.advance(27.0)
        answer = await rig.ask(pods[index % 3])
        assert answer.status == 200
        assert answer.token == first.token
    assert rig.service.calls > 1  # it did try during the outage
    rig.service.behaviour = None
    await rig.advance(LIFETIME * 0.95 - 540.0)
    answer = await rig.ask(pods[0])
    assert answer.status == 200
    assert jti(answer.token) != jti(first.token)


async def test_down_from_the_start_is_503_naming_the_service(rig: AgentRig) -> None:
    """No token can be had: 503 TOKEN_UNAVAILABLE in the sidecar's shape, and the agent stays live."""
    rig.service.behaviour = down_503
    answer = await rig.ask(rig.start_pod(Pod("web-1", "web")))
    assert answer.status == 503
    assert answer.reason == "TOKEN_UNAVAILABLE"
    assert b"token service is down" in answer.body


async def test_slow_service_one_exchange_for_every_pod_of_the_account(rig: AgentRig) -> None:
    """While the service hangs, 60 requests from 6 pods of one account wait on one exchange, and all
    get its token once it answers."""
    pods = [rig.start_pod(Pod(f"web-{i}", "web")) for i in range(6)]
    rig.service.gate = asyncio.Event()
    asks = [asyncio.ensure_future(rig.ask(pods[i % 6])) for i in range(60)]
    while rig.service.calls == 0:
        await asyncio.sleep(0.01)
    rig.service.gate.set()
    answers = await asyncio.gather(*asks)
    assert {a.status for a in answers} == {200}
    assert len({a.token for a in answers}) == 1
    assert rig.service.calls == 1


async def test_refusing_service_is_not_asked_again_per_request(rig: AgentRig) -> None:
    """A 403 reaches the pod in the service's words; 50 more requests for the same identity bring
    no exchange until the backoff's ceiling; another identity is unaffected."""

    async def untrusting(request: web.Request) -> web.StreamResponse | None:
        if request.query["identity"] == "mallory":
            return refusal(
                aip193.Code.PERMISSION_DENIED, "mallory does not trust apps/web", 403, "NOT_TRUSTED"
            )
        return None

    rig.service.behaviour = untrusting
    pod = rig.start_pod(Pod("web-1", "web"))
    first = await rig.ask(pod, identity="mallory")
    assert first.status == 403
    assert first.reason == "NOT_TRUSTED"
    assert b"mallory does not trust apps/web" in first.body
    for _ in range(50):
        assert (await rig.ask(pod, identity="mallory")).status == 403
    assert rig.service.calls == 1
    assert (await rig.ask(pod, identity="alice")).status == 200


async def test_overloaded_service_pauses_every_key_for_its_retry_after(rig_factory: RigFactory) -> None:
    """A 429 with Retry-After: 60 holds back the exchanges of every other key on the node too."""
    rig = await rig_factory()
    overloaded = True

    async def busy(request: web.Request) -> web.StreamResponse | None:
        if overloaded:
            response = refusal(aip193.Code.RESOURCE_EXHAUSTED, "slow down", 429)
            response.headers["Retry-After"] = "60"
            return response
        return None

    rig.service.behaviour = busy
    assert (await rig.ask(rig.start_pod(Pod("a-1", "a")))).status == 503
    overloaded = False
    calls = rig.service.calls
    other = asyncio.ensure_future(rig.ask(rig.start_pod(Pod("b-1", "b"))))
    await rig.drift(30.0)
    assert rig.service.calls == calls  # still paused
    await rig.drift(35.0)
    assert calls < rig.service.calls <= calls + 2  # b's exchange, and a's own retry
    with contextlib.suppress(Exception):
        await other  # its wait (--wait-timeout) ran out on the fake clock: what matters is the pause


async def test_exchange_rate_is_bounded_per_node(rig_factory: RigFactory) -> None:
    """30 service accounts at once with --max-exchanges-per-second 5: at most 5 exchanges start in
    any one second, and every key gets its token in the end."""
    rig = await rig_factory(max_exchanges_per_second=5)
    pods = [rig.start_pod(Pod(f"p-{i}", f"sa-{i}")) for i in range(30)]
    asks = [asyncio.ensure_future(rig.ask(pod)) for pod in pods]
    await rig.drift(0.0)
    assert rig.service.calls <= 5
    for _ in range(10):
        before = rig.service.calls
        await rig.drift(1.0)
        assert rig.service.calls - before <= 5
    answers = [await ask for ask in asks]
    assert rig.service.calls == 30
    registry = rig.node_agent.registry
    assert (registry.get_sample_value("tokenrelay_agent_limiter_waits_total") or 0) >= 20
    assert sum(a.status == 200 for a in answers) >= 25  # the last few may outwait --wait-timeout


async def test_accounts_no_pod_asks_for_are_dropped_and_never_refreshed(rig: AgentRig) -> None:
    """Once no pod of an account has asked for over a token's life, its token is dropped and the
    service never hears of it again; a live account keeps being refreshed."""
    gone = rig.start_pod(Pod("old-1", "old"))
    live = rig.start_pod(Pod("web-1", "web"))
    assert (await rig.ask(gone)).status == 200
    assert (await rig.ask(live)).status == 200
    rig.delete_pod(gone)
    for _ in range(4):
        await rig.advance(LIFETIME / 2)
        assert (await rig.ask(live)).status == 200
    assert len(rig.node_agent.exchanges) == 1
    dropped_at = len(rig.service.seen_id_tokens)
    for _ in range(4):
        await rig.advance(LIFETIME / 2)
        assert (await rig.ask(live)).status == 200
    later = [_account(t) for t in rig.service.seen_id_tokens[dropped_at:]]
    assert later
    assert set(later) == {"web"}


def _pod_name(pod_token: str) -> str:
    import jwt

    claims = jwt.decode(pod_token, options={"verify_signature": False})
    return str(claims["kubernetes.io"]["pod"]["name"])


def _account(pod_token: str) -> str:
    import jwt

    claims = jwt.decode(pod_token, options={"verify_signature": False})
    return str(claims["kubernetes.io"]["serviceaccount"]["name"])


async def test_a_deleted_pods_token_is_refused_and_not_used_for_refreshes(rig: AgentRig) -> None:
    """After its pod is deleted, a pod's token is refused, and the account's next refresh uses the
    token of a pod still running, though the deleted pod's token would live longer."""
    leaving = rig.start_pod(Pod("web-1", "web"))
    staying = rig.start_pod(Pod("web-2", "web"))
    leaving_token = rig.key.token(leaving, rig.auth_url, life=7200)
    assert (await rig.ask(leaving, token=leaving_token)).status == 200
    staying_token = rig.key.token(staying, rig.auth_url)
    assert (await rig.ask(staying, token=staying_token)).status == 200
    rig.delete_pod(leaving)
    refused = await rig.ask(leaving, token=leaving_token)
    assert refused.status == 401
    assert refused.reason == "POD_TOKEN_POD_GONE"
    await rig.advance(LIFETIME * 0.6)
    used = _pod_name(rig.service.seen_id_tokens[-1])
    assert used == "web-2"  # names, not tokens, in a failure


async def test_bounded_cache_drops_the_least_recently_asked(rig_factory: RigFactory) -> None:
    """With --max-cache-entries 2, a third key pushes out the one asked for least recently."""
    rig = await rig_factory(max_cache_entries=2)
    pod = rig.start_pod(Pod("web-1", "web"))
    for audience in ("a.example", "b.example", "a.example", "c.example"):
        assert (await rig.ask(pod, audience=audience)).status == 200
    assert len(rig.node_agent.exchanges) == 2
    calls = rig.service.calls
    assert (await rig.ask(pod, audience="a.example")).status == 200
    assert rig.service.calls == calls
    assert (await rig.ask(pod, audience="b.example")).status == 200
    assert rig.service.calls == calls + 1


async def test_one_connection_asking_too_fast_gets_429(rig_factory: RigFactory) -> None:
    """Past --max-requests-per-connection in one second, a connection gets 429 RATE_LIMITED."""
    rig = await rig_factory(max_requests_per_connection=10)
    pod = rig.start_pod(Pod("web-1", "web"))
    import aiohttp

    async with aiohttp.ClientSession(
        connector=aiohttp.UnixConnector(path=rig.node_agent.settings.socket, limit=1)
    ) as one:
        statuses = []
        for _ in range(15):
            async with one.get(
                "http://agent/v1/token",
                params={"identity": "alice"},
                headers={"Authorization": f"Bearer {rig.key.token(pod, rig.auth_url)}"},
            ) as response:
                statuses.append(response.status)
                if response.status == 429:
                    assert aip193.parse(await response.read())[2] == "RATE_LIMITED"  # type: ignore[index]
    assert statuses[:10] == [200] * 10
    assert set(statuses[10:]) == {429}


async def test_a_kept_verification_still_expires_with_the_token(rig: AgentRig) -> None:
    """A pod token verified once is refused as EXPIRED once its exp passes, though it was accepted
    before: the kept verification does not outlive the token."""
    pod = rig.start_pod(Pod("web-1", "web"))
    short = rig.key.token(pod, rig.auth_url, now=rig.clock.wall(), life=120)
    assert (await rig.ask(pod, token=short)).status == 200
    await rig.advance(130.0)
    refused = await rig.ask(pod, token=short)
    assert refused.status == 401
    assert refused.reason == "POD_TOKEN_EXPIRED"


async def test_the_helpers_client_reads_the_pods_token_file_on_every_call(
    rig: AgentRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The credential helpers' client sends the file's token as it is at each call: once kubelet
    rewrites it (here: another pod's), the next call carries the new one, no restart."""
    from tokenrelay.lite import socketclient

    leaving = rig.start_pod(Pod("web-1", "web"))
    staying = rig.start_pod(Pod("web-2", "web"))
    token_file = short_dir() / "token"
    token_file.write_text(rig.key.token(leaving, rig.auth_url))
    monkeypatch.setenv("TOKENRELAY_AGENT_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("TOKENRELAY_IDENTITY", "alice")
    path = rig.node_agent.settings.socket
    token, expires = await asyncio.to_thread(socketclient.fetch_token_bare, path)
    assert jti(token) == "t1"
    assert expires is not None
    rig.delete_pod(leaving)
    with pytest.raises(socketclient.LocalApiError) as refused:
        await asyncio.to_thread(socketclient.fetch_token_bare, path)
    assert refused.value.reason == "POD_TOKEN_POD_GONE"
    token_file.write_text(rig.key.token(staying, rig.auth_url))
    token, _ = await asyncio.to_thread(socketclient.fetch_token_bare, path)
    assert jti(token) == "t1"


async def test_listen_serves_the_same_api_over_tcp(rig_factory: RigFactory) -> None:
    """--listen adds TCP for clients that cannot use a Unix socket: the same token, the same checks."""
    import aiohttp

    rig = await rig_factory(listen=("127.0.0.1", 0))
    pod = rig.start_pod(Pod("web-1", "web"))
    over_socket = await rig.ask(pod)
    url = f"http://127.0.0.1:{rig.node_agent.tcp_port}/v1/token"
    async with aiohttp.ClientSession() as tcp:
        headers = {"Authorization": f"Bearer {rig.key.token(pod, rig.auth_url)}"}
        async with tcp.get(url, params={"identity": "alice"}, headers=headers) as response:
            assert response.status == 200
            assert (await response.json())["token"] == over_socket.token
        async with tcp.get(url, params={"identity": "alice"}) as response:
            assert response.status == 401


async def test_service_that_rejects_the_pods_token_is_a_403_in_its_words(rig: AgentRig) -> None:
    """A 401 from the service (it does not trust the cluster's issuer) reaches the pod as 403 with the
    service's words: the pod's token passed the agent, the service is the authority."""

    async def untrusted_issuer(request: web.Request) -> web.StreamResponse | None:
        return refusal(
            aip193.Code.UNAUTHENTICATED, "issuer kubernetes.default.svc is not trusted", 401, "ISSUER"
        )

    rig.service.behaviour = untrusted_issuer
    answer = await rig.ask(rig.start_pod(Pod("web-1", "web")))
    assert answer.status == 403
    assert answer.reason == "ISSUER"
    assert b"issuer kubernetes.default.svc is not trusted" in answer.body
