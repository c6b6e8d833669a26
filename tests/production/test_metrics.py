"""What Prometheus scrapes: values after exchanges, failures, token requests and proxied calls."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from tokenrelay.errors import ConfigError, TokenUnavailable
from tokenrelay.lite import aip193
from tokenrelay.serving.probes import MetricsServer
from tokenrelay.sidecar import localapi
from tokenrelay.sidecar.metrics import Metrics
from tokenrelay.testing import FakeClock, make_jwt, refusal
from tokenrelay.tokens.backoff import Backoff
from tokenrelay.tokens.exchanger import Exchanger
from tokenrelay.tokens.idsources import FileSource
from tokenrelay.tokens.provider import TokenProvider, TokenProviders
from tokenrelay.tokens.sts import Issued

from ..support.production import Upstream

API = "https://api.example.test"
NO_WAIT = Backoff(base=0.0, cap=0.0)  # retry at once: each get() is one more attempt


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def make_provider(
    upstream: Upstream, id_token_file: Path, metrics: Metrics, clock: FakeClock
) -> tuple[TokenProvider, aiohttp.ClientSession]:
    session = aiohttp.ClientSession()
    exchanger = Exchanger(
        session, upstream.url, "org/ci", FileSource(str(id_token_file)), on_id_token=metrics.id_token
    )
    provider = TokenProvider(
        API, exchanger, clock=clock, wall=clock.wall, sleep=clock.sleep, backoff=NO_WAIT, observers=[metrics]
    )
    return provider, session


async def test_exchange_sets_counters_expiry_and_id_token_expiry(
    upstream: Upstream, id_token_file: Path
) -> None:
    """After one exchange: one success, a duration sample, the token's expiry and the OIDC token's."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, [API])
    clock = FakeClock()
    provider, session = await make_provider(upstream, id_token_file, metrics, clock)
    async with session:
        token = await provider.get()
    assert value(registry, "tokenrelay_exchanges_total", audience=API, result="success") == 1
    assert value(registry, "tokenrelay_exchanges_total", audience=API, result="failure") == 0
    assert value(registry, "tokenrelay_exchange_duration_seconds_count", audience=API) == 1
    assert value(registry, "tokenrelay_exchange_consecutive_failures", audience=API) == 0
    assert value(registry, "tokenrelay_token_expiry_timestamp_seconds", audience=API) == token.expire_wall
    assert abs(token.expire_wall - (time.time() + 3600)) < 60
    id_exp = value(registry, "tokenrelay_id_token_expiry_timestamp_seconds")
    assert id_exp is not None
    assert abs(id_exp - (time.time() + 600)) < 60


async def test_failures_count_up_and_reset_on_success(upstream: Upstream, id_token_file: Path) -> None:
    """Failures raise the consecutive-failures gauge one by one; a success brings it back to 0."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, [API])
    clock = FakeClock()
    failing = True

    async def outage(request: web.Request) -> web.Response | None:
        if failing:
            return refusal(aip193.Code.UNAVAILABLE, "down for maintenance", 503)
        return None

    upstream.service.behaviour = outage
    provider, session = await make_provider(upstream, id_token_file, metrics, clock)
    async with session:
        for expected in (1, 2, 3):
            with pytest.raises(TokenUnavailable):
                await provider.get()
            assert value(registry, "tokenrelay_exchange_consecutive_failures", audience=API) == expected
        failing = False
        await provider.get()
    assert value(registry, "tokenrelay_exchanges_total", audience=API, result="failure") == 3
    assert value(registry, "tokenrelay_exchanges_total", audience=API, result="success") == 1
    assert value(registry, "tokenrelay_exchange_consecutive_failures", audience=API) == 0
    assert value(registry, "tokenrelay_exchange_duration_seconds_count", audience=API) == 4


async def test_clock_skew_from_the_date_header(upstream: Upstream, id_token_file: Path) -> None:
    """The token service's Date header 30 s ahead of us shows as a clock skew of +30."""
    our_now = float(int(time.time()))
    registry = CollectorRegistry()
    metrics = Metrics(registry, [API], wall=lambda: our_now)

    async def ahead(request: web.Request) -> web.Response:
        token = upstream.service.mint(API)
        return web.json_response({"token": token}, headers={"Date": formatdate(our_now + 30, usegmt=True)})

    upstream.service.behaviour = ahead
    provider, session = await make_provider(upstream, id_token_file, metrics, FakeClock())
    async with session:
        await provider.get()
    assert value(registry, "tokenrelay_clock_skew_seconds") == 30


async def test_token_requests_counted_by_via(
    aiohttp_client: Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]],
) -> None:
    """Each request to the socket's /v1/token counts under via="socket"."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    clock = FakeClock()
    token = make_jwt({"jti": "t1", "iat": int(clock.wall()), "exp": int(clock.wall()) + 3600})

    async def issue(audience: str) -> Issued:
        return Issued(token)

    providers = TokenProviders([TokenProvider(API, issue, clock=clock, wall=clock.wall)])
    client = await aiohttp_client(localapi.create_app(providers, providers.ready, metrics.count))
    for _ in range(3):
        assert (await client.get("/v1/token")).status == 200
    assert value(registry, "tokenrelay_token_requests_total", via="socket") == 3


def test_proxy_hook_counts_codes_durations_and_retries() -> None:
    """The proxy's request() and retry() calls show as requests by code, a latency histogram, retries."""
    registry = CollectorRegistry()
    hook = Metrics(registry).proxy
    hook.request(200, 0.02)
    hook.request(200, 0.3)
    hook.request(502, 1.5)
    hook.retry()
    assert value(registry, "tokenrelay_proxy_requests_total", code="200") == 2
    assert value(registry, "tokenrelay_proxy_requests_total", code="502") == 1
    assert value(registry, "tokenrelay_proxy_request_duration_seconds_count") == 3
    assert value(registry, "tokenrelay_proxy_request_duration_seconds_sum") == pytest.approx(1.82)
    assert value(registry, "tokenrelay_proxy_request_duration_seconds_bucket", le="0.5") == 2
    assert value(registry, "tokenrelay_proxy_retries_total") == 1


def test_proxy_hook_counts_http2_streams_by_grpc_status() -> None:
    """HTTP/2 streams count as requests by code and, apart, by the grpc-status the client got."""
    registry = CollectorRegistry()
    hook = Metrics(registry).proxy
    hook.stream(200, 0, 0.01)
    hook.stream(200, 14, 0.01)
    hook.stream(200, 0, 0.01)
    hook.stream(503, None, 0.01)
    assert value(registry, "tokenrelay_proxy_requests_total", code="200") == 3
    assert value(registry, "tokenrelay_proxy_requests_total", code="503") == 1
    assert value(registry, "tokenrelay_proxy_http2_streams_total", grpc_status="0") == 2
    assert value(registry, "tokenrelay_proxy_http2_streams_total", grpc_status="14") == 1
    assert value(registry, "tokenrelay_proxy_http2_streams_total", grpc_status="") == 1
    assert value(registry, "tokenrelay_proxy_request_duration_seconds_count") == 4


def test_metrics_use_only_the_injected_registry() -> None:
    """Two Metrics on two registries coexist: nothing is registered on the global default registry."""
    from prometheus_client import REGISTRY

    before = set(REGISTRY._names_to_collectors)
    Metrics(CollectorRegistry(), [API])
    Metrics(CollectorRegistry(), [API])
    assert set(REGISTRY._names_to_collectors) == before


async def test_metrics_port_serves_metrics_and_health_but_never_a_token() -> None:
    """The metrics port answers /metrics, /healthz, /readyz; /v1/token there is a 404 without a token."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, [API])
    reason: list[str | None] = ["audience x: no token yet"]
    server = MetricsServer(("127.0.0.1", 0), registry, lambda: reason[0])
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/metrics") as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")
                text = await response.text()
            assert (
                'tokenrelay_exchanges_total{audience="https://api.example.test",result="success"} 0.0' in text
            )
            async with session.get(base + "/healthz") as response:
                assert response.status == 200
            async with session.get(base + "/readyz") as response:
                assert response.status == 503
                assert "no token yet" in await response.text()
            reason[0] = None
            async with session.get(base + "/readyz") as response:
                assert response.status == 200
            for path in ("/v1/token", "/v1/token?audience=https://api.example.test", "/token"):
                async with session.get(base + path) as response:
                    assert response.status == 404
                    assert "eyJ" not in await response.text()
    finally:
        await server.stop()
    assert metrics.registry is registry


async def test_metrics_port_in_use_names_the_flag() -> None:
    """A --metrics-listen address already taken fails with a message naming the flag."""
    first = MetricsServer(("127.0.0.1", 0), CollectorRegistry(), lambda: None)
    await first.start()
    assert first.port is not None
    try:
        second = MetricsServer(("127.0.0.1", first.port), CollectorRegistry(), lambda: None)
        with pytest.raises(ConfigError, match=r"--metrics-listen \(env TOKENRELAY_METRICS_LISTEN\)"):
            await second.start()
    finally:
        await first.stop()


async def test_openmetrics_on_request(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> None:
    """A scraper asking for OpenMetrics gets it."""
    from tokenrelay.serving.probes import create_app

    server = await aiohttp_server(create_app(CollectorRegistry(), lambda: None))
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            server.make_url("/metrics"), headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        ) as response,
    ):
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        assert (await response.text()).endswith("# EOF\n")
