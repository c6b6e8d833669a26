"""When tokens are exchanged: schedule, jitter, single flight, failures and recovery."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenrelay.errors import TokenRelayError, TokenUnavailable
from tokenrelay.lite import aip193
from tokenrelay.lite.timestamps import format_timestamp
from tokenrelay.sidecar import daemon
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import FakeClock, FakeTokenService, jti, make_jwt, refusal
from tokenrelay.tokens.provider import TokenProvider, TokenProviders
from tokenrelay.tokens.sts import Issued
from tokenrelay.tokens.token import Token, TokenState

from ..support.core import API, Harness
from ..support.waiting import eventually


async def test_first_get_exchanges_and_later_gets_reuse(harness: Harness) -> None:
    """The first caller triggers an exchange; later callers get the same token with no new call."""
    provider = harness.provider()
    first = await provider.get()
    again = await provider.get()
    assert jti(first.value) == "t1" and again is first
    assert harness.service.calls == 1


async def test_lifetime_comes_from_the_token_not_an_assumed_hour(harness: Harness) -> None:
    """A 20-minute token is scheduled as 20 minutes: refresh near 10, expiry at 20."""
    harness.service.lifetime = 1200
    token = await harness.provider().get()
    assert token.lifetime == pytest.approx(1200, abs=1)
    assert 0.45 * 1200 <= token.refresh_at - token.received_at <= 0.50 * 1200


@pytest.mark.parametrize("seed", range(40))
async def test_refresh_point_is_half_life_within_ten_percent_jitter(harness: Harness, seed: int) -> None:
    """The refresh lands at 45-50% of the token's life: never later than half, so that half the
    life always remains to ride out a token-service outage."""
    token = await harness.provider(seed=seed).get()
    fraction = (token.refresh_at - token.received_at) / token.lifetime
    assert 0.45 <= fraction <= 0.50


async def test_jitter_spreads_a_fleet(harness: Harness) -> None:
    """Providers started together do not all pick the same refresh point."""
    points = {round((await harness.provider(seed=s).get()).refresh_at, 3) for s in range(20)}
    assert len(points) > 15


async def test_stale_token_is_served_at_once_while_the_refresh_runs(harness: Harness) -> None:
    """Past the refresh point the caller gets the old token immediately; the new one follows."""
    provider = harness.provider()
    old = await provider.get()
    harness.service.gate = asyncio.Event()  # hold the next exchange open
    harness.clock.tick(old.refresh_at - harness.clock.now + 1)
    assert old.state(harness.clock.now) is TokenState.STALE
    served = await provider.get()
    assert served is old
    await eventually(lambda: harness.service.calls == 2, "harness.service.calls == 2")
    harness.service.gate.set()
    await eventually(lambda: provider.token is not old, "provider.token is not old")
    assert jti((await provider.get()).value) == "t2"


async def test_hundred_concurrent_callers_cause_one_exchange(harness: Harness) -> None:
    """100 callers arriving before any token exists share a single exchange."""
    provider = harness.provider()
    harness.service.gate = asyncio.Event()
    callers = [asyncio.ensure_future(provider.get()) for _ in range(100)]
    await eventually(lambda: harness.service.calls == 1, "harness.service.calls == 1")
    harness.service.gate.set()
    tokens = await asyncio.gather(*callers)
    assert {jti(t.value) for t in tokens} == {"t1"}
    assert harness.service.calls == 1


async def test_a_caller_that_gives_up_does_not_cancel_the_exchange(harness: Harness) -> None:
    """Cancelling one waiting caller leaves the shared exchange running for the others."""
    provider = harness.provider()
    harness.service.gate = asyncio.Event()
    quitter = asyncio.ensure_future(provider.get())
    stayer = asyncio.ensure_future(provider.get())
    await eventually(lambda: harness.service.calls == 1, "harness.service.calls == 1")
    quitter.cancel()
    harness.service.gate.set()
    assert jti((await stayer).value) == "t1"
    assert harness.service.calls == 1


async def test_outage_keeps_old_token_then_503_then_recovers(harness: Harness) -> None:
    """Token service down: the old token is served until it expires, then a clear error, then recovery."""
    provider = harness.provider()
    run = asyncio.ensure_future(provider.run())
    try:
        old = await provider.get()

        async def down(request: web.Request) -> web.StreamResponse:
            return refusal(aip193.Code.UNAVAILABLE, "maintenance window", 503, "BACKEND_DOWN")

        harness.service.behaviour = down
        await harness.clock.advance(old.lifetime * 0.9, step=5)  # well past the refresh point
        assert harness.attempts > 2  # it kept trying...
        assert (await provider.get()) is old  # ...and kept serving the old token
        await harness.clock.advance(old.lifetime * 0.1, step=5)  # now it has expired
        with pytest.raises(TokenUnavailable, match="maintenance window"):
            await provider.get()
        harness.service.behaviour = None
        await harness.clock.advance(31, step=1)  # beyond the longest backoff
        fresh = await provider.get()
        assert fresh.value != old.value and fresh.state(harness.clock.now) is TokenState.FRESH
    finally:
        run.cancel()


async def test_retries_back_off_within_the_cap(harness: Harness) -> None:
    """Failing exchanges are retried with growing, capped delays: no hammering, no giving up."""
    provider = harness.provider()

    async def down(request: web.Request) -> web.StreamResponse:
        return refusal(aip193.Code.UNAVAILABLE, "down", 503)

    harness.service.behaviour = down
    run = asyncio.ensure_future(provider.run())
    try:
        await harness.clock.advance(600, step=0.5)
    finally:
        run.cancel()
    # Full jitter, 1 s base, 30 s cap: at least 600/30 attempts, far fewer than one per second.
    assert 20 <= harness.attempts <= 200


async def test_retry_after_is_honoured(harness: Harness) -> None:
    """A Retry-After from the token service holds the next attempt back at least that long."""
    provider = harness.provider()

    async def busy(request: web.Request) -> web.StreamResponse:
        response = refusal(aip193.Code.RESOURCE_EXHAUSTED, "slow down", 429)
        response.headers["Retry-After"] = "120"
        return response

    harness.service.behaviour = busy
    run = asyncio.ensure_future(provider.run())
    try:
        await eventually(
            lambda: provider.status().consecutive_failures == 1, "provider.status().consecutive_failures == 1"
        )
        await harness.clock.advance(119, step=1)
        assert harness.attempts == 1
        await harness.clock.advance(2, step=1)
        assert harness.attempts == 2
    finally:
        run.cancel()


async def test_refusal_reads_as_the_services_own_words(harness: Harness) -> None:
    """A 403 with an AIP-193 body surfaces its message and reason, not just "HTTP 403"."""

    async def mismatch(request: web.Request) -> web.StreamResponse:
        return refusal(
            aip193.Code.PERMISSION_DENIED,
            "identity org/ci does not match the token's subject",
            403,
            "CLAIM_MISMATCH",
        )

    harness.service.behaviour = mismatch
    with pytest.raises(TokenUnavailable) as caught:
        await harness.provider().get()
    message = str(caught.value)
    assert "does not match the token's subject" in message
    assert "CLAIM_MISMATCH" in message and "PERMISSION_DENIED" in message


async def test_wall_clock_jumps_do_not_move_the_refresh(harness: Harness) -> None:
    """An hour's jump of the wall clock, either way, leaves the monotonic schedule alone."""
    provider = harness.provider()
    run = asyncio.ensure_future(provider.run())
    try:
        token = await provider.get()
        harness.clock.jump_wall(3600)
        await harness.clock.advance(token.refresh_at - harness.clock.now - 5, step=30)
        assert harness.attempts == 1  # not refreshed early
        harness.clock.jump_wall(-7200)
        await harness.clock.advance(10, step=1)
        assert harness.attempts == 2  # refreshed on time
    finally:
        run.cancel()


async def test_skewed_issuer_clock_does_not_change_the_lifetime(harness: Harness) -> None:
    """A token service whose clock is 10 minutes off still yields a one-hour schedule."""
    clock = FakeClock()

    async def skewed(audience: str) -> Issued:
        issuer_now = clock.wall() + 600
        return Issued(make_jwt({"iat": issuer_now, "exp": issuer_now + 3600}), None, issuer_now)

    token = await TokenProvider(API, skewed, clock=clock, wall=clock.wall, sleep=clock.sleep).get()
    assert token.lifetime == pytest.approx(3600)


async def test_expiry_field_is_used_for_opaque_tokens() -> None:
    """A token that is not a JWT takes its life from the response's `expiry`."""
    clock = FakeClock()

    async def opaque(audience: str) -> Issued:
        return Issued("opaque-token-value", expiry=clock.wall() + 900)

    token = await TokenProvider(API, opaque, clock=clock, wall=clock.wall, sleep=clock.sleep).get()
    assert token.lifetime == pytest.approx(900)


async def test_opaque_token_without_expiry_lives_one_hour() -> None:
    """With nothing to go on, the documented one-hour lifetime applies."""
    clock = FakeClock()

    async def opaque(audience: str) -> Issued:
        return Issued("opaque-token-value")

    token = await TokenProvider(API, opaque, clock=clock, wall=clock.wall, sleep=clock.sleep).get()
    assert token.lifetime == 3600


async def test_already_expired_token_is_refused_and_old_one_kept(harness: Harness) -> None:
    """A 200 carrying an expired token is an error; the token we hold stays in service."""
    provider = harness.provider()
    old = await provider.get()

    async def expired(request: web.Request) -> web.StreamResponse:
        now = harness.clock.wall()
        return web.json_response({"token": harness.service.mint(API, lifetime=60, iat=now - 3600)})

    harness.service.behaviour = expired
    provider.refresh_now()
    await eventually(lambda: provider.status().error is not None, "provider.status().error is not None")
    assert "too short-lived" in (provider.status().error or "")
    assert (await provider.get()) is old


async def test_reject_refreshes_once_for_everyone(harness: Harness) -> None:
    """Many callers reporting the same rejected token cause one refresh and all get the new token."""
    provider = harness.provider()
    old = await provider.get()
    harness.service.gate = asyncio.Event()
    rejections = [asyncio.ensure_future(provider.reject(old)) for _ in range(20)]
    await eventually(lambda: harness.service.calls == 2, "harness.service.calls == 2")
    harness.service.gate.set()
    fresh = await asyncio.gather(*rejections)
    assert {jti(t.value) for t in fresh} == {"t2"}
    late = await provider.reject(old)  # a caller that saw the old token fail only now
    assert jti(late.value) == "t2" and harness.service.calls == 2


async def test_rejections_during_an_outage_respect_the_backoff(harness: Harness) -> None:
    """A flood of 401s while the token service is down causes one exchange, not one per 401."""
    provider = harness.provider()
    old = await provider.get()

    async def down(request: web.Request) -> web.StreamResponse:
        return refusal(aip193.Code.UNAVAILABLE, "down", 503)

    harness.service.behaviour = down
    with pytest.raises(TokenUnavailable, match="down"):
        await provider.reject(old)
    for _ in range(50):
        with pytest.raises(TokenUnavailable, match="next attempt in"):
            await provider.reject(old)
    assert harness.attempts == 2  # the first token, and the one forced refresh


async def test_first_start_with_service_down_fails_fast_with_reason(harness: Harness) -> None:
    """With no token and a failed attempt, callers get the reason at once, not a long hang."""

    async def down(request: web.Request) -> web.StreamResponse:
        return refusal(aip193.Code.UNAVAILABLE, "token service is starting", 503)

    harness.service.behaviour = down
    provider = harness.provider()
    with pytest.raises(TokenUnavailable, match="token service is starting"):
        await provider.get()
    with pytest.raises(TokenUnavailable, match="next attempt in"):
        await provider.get()  # inside the backoff window: answered from the last error
    assert harness.service.calls == 1


async def test_one_seed_gives_each_audience_its_own_reproducible_jitter(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> None:
    """daemon.build draws every audience's jitter from the one rng it is given: the same seed gives
    the same refresh points again (tests and the herd bench rely on it), and the audiences differ."""
    service = FakeTokenService()
    server = await aiohttp_server(service.app())
    settings = Settings(
        auth_url=str(server.make_url("")).rstrip("/"),
        api_url=API,
        identity="org/ci",
        audience=("registry.example",),
        id_token_source="env",
        id_token_env="OIDC",
    )

    async def refresh_points(seed: int) -> list[float]:
        clock = FakeClock()
        sidecar = daemon.build(
            settings,
            clock=clock,
            wall=clock.wall,
            sleep=clock.sleep,
            rng=random.Random(seed),
            environ={"OIDC": make_jwt({"sub": "ci", "exp": 4_000_000_000})},
        )
        try:
            tokens = [await sidecar.providers.get(audience) for audience in settings.audiences]
        finally:
            await sidecar.session.close()
        return [(t.refresh_at - t.received_at) / t.lifetime for t in tokens]

    first, again, other = await refresh_points(7), await refresh_points(7), await refresh_points(8)
    assert first == again
    assert first[0] != first[1]
    assert other != first


class _Ceiling(random.Random):
    """Full jitter that always picks the top of its range: the backoff's ceiling, made visible."""

    def uniform(self, a: float, b: float) -> float:
        return b


@pytest.mark.parametrize(("status", "first_wait"), [(503, 1.0), (429, 1.0), (403, 30.0), (400, 30.0)])
async def test_backoff_reads_retryable_from_the_answer(status: int, first_wait: float) -> None:
    """A failure of the moment is retried within a second; a refusal that waits for a configuration
    change (not retryable, as stsanswer decides) is retried at the backoff's cap from the start."""
    from tokenrelay.lite import stsanswer

    clock = FakeClock()

    async def fetch(audience: str) -> Issued:
        raise stsanswer.refusal(
            status,
            b"{}",
            audience=audience,
            id_token="x",
            location=None,
            retry_after=None,
            auth_url_setting="",
            identity_setting="",
        )

    provider = TokenProvider(API, fetch, clock=clock, wall=clock.wall, sleep=clock.sleep, rng=_Ceiling())
    with pytest.raises(TokenUnavailable):
        await provider.get()
    assert provider.retry_in() == first_wait


@pytest.mark.parametrize(
    "exp", [253402300800, 10**400, float("inf"), float("nan")], ids=["year-10000", "huge", "inf", "nan"]
)
async def test_an_exp_no_timestamp_can_show_counts_as_no_exp(harness: Harness, exp: float) -> None:
    """exp past year 9999, Infinity or NaN: the documented hour applies and the schedule runs on."""

    async def odd(request: web.Request) -> web.StreamResponse:
        return web.json_response({"token": make_jwt({"aud": API, "exp": exp})})

    harness.service.behaviour = odd
    provider = harness.provider()
    schedule = asyncio.ensure_future(provider.run())
    try:
        await _until(lambda: provider.token is not None)
        token = provider.token
        assert token is not None and token.lifetime == 3600
        assert token.expire_time == format_timestamp(harness.clock.wall() + 3600)
        await _until(lambda: harness.clock.sleeping == 1)  # the schedule waits for the refresh point
        harness.clock.tick(token.refresh_at - harness.clock.now + 1)
        await _until(lambda: harness.service.calls == 2)  # the schedule outlived the odd token
    finally:
        schedule.cancel()
        await asyncio.gather(schedule, return_exceptions=True)


async def test_a_crashing_observer_is_logged_and_changes_nothing(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """An observer that raises (a metrics or sink bug): callers get the token, the schedule goes on."""

    class Crashing:
        def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
            raise RuntimeError("bug")

        def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
            raise RuntimeError("bug")

    provider = TokenProvider(
        API,
        harness.fetch,
        clock=harness.clock,
        wall=harness.clock.wall,
        sleep=harness.clock.sleep,
        rng=random.Random(1),
        observers=[Crashing()],
    )
    token = await provider.get()
    assert jti(token.value) == "t1"
    assert "observer failed: internal error" in caplog.text
    schedule = asyncio.ensure_future(provider.run())
    try:
        await _until(lambda: harness.clock.sleeping == 1)
        harness.clock.tick(token.refresh_at - harness.clock.now + 1)
        await _until(lambda: provider.token is not token)
    finally:
        schedule.cancel()
        await asyncio.gather(schedule, return_exceptions=True)


async def test_stop_cancels_an_exchange_in_flight_without_a_failure(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopping mid-exchange records no failure and logs no "exchange failed" (the session closes next)."""
    provider = harness.provider()
    providers = TokenProviders([provider])
    harness.service.gate = asyncio.Event()
    providers.start()
    await _until(lambda: harness.service.calls == 1)
    await providers.stop()
    assert provider.in_flight is None
    assert provider.status().error is None
    assert "exchange failed" not in caplog.text


async def _until(condition: object, limit: int = 2000) -> None:
    """Let the event loop run until ``condition()`` holds (bounded by iterations, not time)."""
    assert callable(condition)
    for _ in range(limit):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


async def test_a_cancelled_caller_is_cancelled_even_as_the_exchange_fails() -> None:
    """A caller cancelled just as the exchange it waits on fails (exec's start, on SIGTERM during a
    token-service outage) gets CancelledError, not the failure: it must not retry on and on."""
    from tokenrelay.errors import ExchangeError

    cancelled = 0
    for turns in range(8):  # the cancel lands at each turn of the loop while the exchange fails
        clock = FakeClock()
        release = asyncio.Event()

        async def fetch(audience: str, release: asyncio.Event = release) -> Issued:
            await release.wait()
            raise ExchangeError("token service down")  # retryable

        provider = TokenProvider(API, fetch, clock=clock, wall=clock.wall, sleep=clock.sleep)
        caller = asyncio.ensure_future(provider.get())
        for _ in range(3):  # the caller waits on the exchange
            await asyncio.sleep(0)
        release.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        if caller.done():  # the failure reached the caller before the cancel: nothing to lose
            with pytest.raises(TokenUnavailable):
                await caller
            continue
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        cancelled += 1
    assert cancelled >= 2
