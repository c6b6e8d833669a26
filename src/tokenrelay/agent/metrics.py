"""The agent's Prometheus metrics: its cache, its exchanges, its refusals and its limiter's waits.

Labels stay bounded: results and refusal reasons are fixed sets, never a namespace, identity or
audience (a node may serve thousands of keys).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .._version import __version__
from ..errors import TokenRelayError
from ..serving.metrics import EXCHANGE_BUCKETS
from ..tokens.sts import Issued
from ..tokens.token import Token


class AgentMetrics:
    """Every metric of ``tokenrelay agent``; an Observer of every key's provider."""

    def __init__(
        self,
        registry: CollectorRegistry,
        pods: Callable[[], int] = lambda: 0,
        connections: Callable[[], int] = lambda: 0,
    ) -> None:
        self.registry = registry
        self._entries = Gauge(
            "tokenrelay_agent_cache_entries",
            "Tokens held, one per (service account, identity, audience) asked for on this node.",
            registry=registry,
        )
        lookups = Counter(
            "tokenrelay_agent_cache_lookups",
            "Token requests, by whether a valid token was held (hit) or had to be waited for (miss).",
            ["result"],
            registry=registry,
        )
        self._hit, self._miss = lookups.labels(result="hit"), lookups.labels(result="miss")
        exchanges = Counter(
            "tokenrelay_agent_exchanges",
            "Exchanges at the token service, by result (success or failure).",
            ["result"],
            registry=registry,
        )
        self._success, self._failure = exchanges.labels(result="success"), exchanges.labels(result="failure")
        self._duration = Histogram(
            "tokenrelay_agent_exchange_duration_seconds",
            "Time one exchange took, the limiter's wait included.",
            buckets=EXCHANGE_BUCKETS,
            registry=registry,
        )
        self._refusals = Counter(
            "tokenrelay_agent_refusals",
            "Requests and connections refused, by reason (POD_TOKEN_<CHECK>, the token service's "
            "reason, TOKEN_UNAVAILABLE, RATE_LIMITED, POD_RATE_LIMITED, IDENTITY_MISSING, "
            "TOO_MANY_CONNECTIONS, TOO_MANY_CONNECTIONS_FROM_PEER).",
            ["reason"],
            registry=registry,
        )
        self._by_reason: dict[str, Counter] = {}
        self._waits = Counter(
            "tokenrelay_agent_limiter_waits",
            "Exchanges held back by the node's exchange rate limit or an overloaded service's pause.",
            registry=registry,
        )
        self._waited = Counter(
            "tokenrelay_agent_limiter_wait_seconds",
            "Seconds exchanges spent held back by the limiter.",
            registry=registry,
        )
        Gauge(
            "tokenrelay_agent_pods", "Pods running on this node, from the agent's watch.", registry=registry
        ).set_function(lambda: float(pods()))
        Gauge(
            "tokenrelay_agent_connections",
            "Client connections open on the agent's socket (and --listen).",
            registry=registry,
        ).set_function(lambda: float(connections()))
        closed = Counter(
            "tokenrelay_agent_connections_timed_out",
            "Client connections closed for a request head not sent in time (head_timeout) or an idle "
            "keep-alive (idle_timeout).",
            ["why"],
            registry=registry,
        )
        self._timed_out = {why: closed.labels(why=why) for why in ("head_timeout", "idle_timeout")}
        Gauge(
            "tokenrelay_build_info", "Always 1; the version is a label.", ["version"], registry=registry
        ).labels(version=__version__).set(1)
        for reason in (
            "TOKEN_UNAVAILABLE",
            "RATE_LIMITED",
            "POD_RATE_LIMITED",
            "TOO_MANY_CONNECTIONS",
            "POD_TOKEN_SIGNATURE",
            "POD_TOKEN_POD_GONE",
        ):
            self.refused(reason, count=0)

    def entries(self, size: int) -> None:
        self._entries.set(size)

    def lookup(self, hit: bool) -> None:
        (self._hit if hit else self._miss).inc()

    def refused(self, reason: str, count: int = 1) -> None:
        child = self._by_reason.get(reason)
        if child is None:
            child = self._by_reason[reason] = self._refusals.labels(reason=reason)
        child.inc(count)

    def timed_out(self, why: str) -> None:
        self._timed_out[why].inc()

    def waited(self, seconds: float) -> None:
        self._waits.inc()
        self._waited.inc(seconds)

    # -- Observer ---------------------------------------------------------------------------

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
        self._success.inc()
        self._duration.observe(duration)

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
        self._failure.inc()
        self._duration.observe(duration)
