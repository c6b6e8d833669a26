"""Prometheus metrics: the collectors only (``probes`` serves them on the metrics port).

Everything lives on a ``CollectorRegistry`` the caller passes in, never the process-wide default, so
two daemons in one process (the tests, ``tokenrelay dev``) keep their figures apart. ``Metrics`` is a
provider ``Observer`` (exchanges and failures) and offers the other hooks the daemon wires: the OIDC
token's expiry (``id_token``), requests for a token (``count``) and the proxy's ``ProxyMetrics``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .._version import __version__
from ..errors import TokenRelayError
from ..serving.metrics import EXCHANGE_BUCKETS
from ..tokens.sts import Issued
from ..tokens.token import Token

log = logging.getLogger("tokenrelay.metrics")

# Proxied calls include the upstream's own work, up to --proxy-timeout (60 s by default).
PROXY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ProxyMetrics:
    """The proxy's hook: one call per answered request and one per retry after an upstream 401."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._requests = Counter(
            "tokenrelay_proxy_requests",
            "Requests answered by the proxy, by HTTP status code sent to the client.",
            ["code"],
            registry=registry,
        )
        self._duration = Histogram(
            "tokenrelay_proxy_request_duration_seconds",
            "Time from a proxied request's arrival to the end of its answer.",
            buckets=PROXY_BUCKETS,
            registry=registry,
        )
        self._by_code: dict[int, Counter] = {}
        self._retries = Counter(
            "tokenrelay_proxy_retries",
            "Requests the proxy sent upstream a second time: with a refreshed token after a 401, or on a "
            "new connection when a pooled one had been closed by the upstream.",
            registry=registry,
        )
        self._streams = Counter(
            "tokenrelay_proxy_http2_streams",
            "HTTP/2 streams answered by the proxy (also counted in tokenrelay_proxy_requests), by the "
            "grpc-status the client got (empty when the call is not gRPC or got none).",
            ["grpc_status"],
            registry=registry,
        )
        self._by_grpc_status: dict[int | None, Counter] = {}

    def request(self, code: int, duration: float) -> None:
        child = self._by_code.get(code)
        if child is None:  # labels() takes a lock and builds a key: once per code, not per request
            child = self._by_code[code] = self._requests.labels(code=str(code))
        child.inc()
        self._duration.observe(duration)

    def retry(self) -> None:
        self._retries.inc()

    def stream(self, code: int, grpc_status: int | None, duration: float) -> None:
        self.request(code, duration)
        child = self._by_grpc_status.get(grpc_status)
        if child is None:
            label = "" if grpc_status is None else str(grpc_status)
            child = self._by_grpc_status[grpc_status] = self._streams.labels(grpc_status=label)
        child.inc()


class Metrics:
    """Every tokenrelay metric, fed by the providers (as an Observer) and the daemon's hooks."""

    def __init__(
        self,
        registry: CollectorRegistry,
        audiences: Sequence[str] = (),
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry
        self._wall = wall
        self._token_expiry = Gauge(
            "tokenrelay_token_expiry_timestamp_seconds",
            "Unix time at which the API token held for the audience expires.",
            ["audience"],
            registry=registry,
        )
        self._exchanges = Counter(
            "tokenrelay_exchanges",
            "Token exchanges, by audience and result (success or failure).",
            ["audience", "result"],
            registry=registry,
        )
        self._exchange_duration = Histogram(
            "tokenrelay_exchange_duration_seconds",
            "Time one exchange took, reading the OIDC token included.",
            ["audience"],
            buckets=EXCHANGE_BUCKETS,
            registry=registry,
        )
        self._consecutive_failures = Gauge(
            "tokenrelay_exchange_consecutive_failures",
            "Exchanges that failed in a row for the audience; 0 after a success.",
            ["audience"],
            registry=registry,
        )
        self._id_token_expiry = Gauge(
            "tokenrelay_id_token_expiry_timestamp_seconds",
            "Unix time at which the OIDC token last read expires (0 when it is not a JWT).",
            registry=registry,
        )
        self._clock_skew = Gauge(
            "tokenrelay_clock_skew_seconds",
            "The token service's clock (its Date header, 1 s resolution) minus this host's.",
            registry=registry,
        )
        self._by_via: dict[str, Counter] = {}
        self._token_requests = Counter(
            "tokenrelay_token_requests",
            "Requests for a token, by the way they came (socket, proxy, ...).",
            ["via"],
            registry=registry,
        )
        Gauge(
            "tokenrelay_build_info", "Always 1; the version is a label.", ["version"], registry=registry
        ).labels(version=__version__).set(1)
        self._renders = Counter(
            "tokenrelay_render_writes",
            "Writes of --render files, by path and result (success or failure: a full disk, a "
            "read-only path, a file that is not the format).",
            ["format", "path", "result"],
            registry=registry,
        )
        self._render_time = Gauge(
            "tokenrelay_render_last_success_timestamp_seconds",
            "Unix time at which the --render file was last written.",
            ["format", "path"],
            registry=registry,
        )
        self.proxy = ProxyMetrics(registry)
        # Zero-valued series from the start, so that rate() and absent() alerts work before the
        # first failure ever happens.
        for audience in audiences:
            for result in ("success", "failure"):
                self._exchanges.labels(audience=audience, result=result)
            self._consecutive_failures.labels(audience=audience).set(0)

    # -- Observer ---------------------------------------------------------------------------

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
        audience = token.audience
        self._exchanges.labels(audience=audience, result="success").inc()
        self._exchange_duration.labels(audience=audience).observe(duration)
        self._consecutive_failures.labels(audience=audience).set(0)
        self._token_expiry.labels(audience=audience).set(token.expire_wall)
        if issued.server_time is not None:
            self._clock_skew.set(issued.server_time - self._wall())

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
        self._exchanges.labels(audience=audience, result="failure").inc()
        self._exchange_duration.labels(audience=audience).observe(duration)
        self._consecutive_failures.labels(audience=audience).set(consecutive)

    # -- the daemon's other hooks -------------------------------------------------------------

    def id_token(self, expiry: float | None) -> None:
        """``Exchanger.on_id_token``: the OIDC token just read expires at ``expiry``."""
        self._id_token_expiry.set(expiry if expiry is not None else 0)

    def render(self, name: str, path: str, ok: bool) -> None:
        """``render.Report``: a --render file was written (or not)."""
        self._renders.labels(format=name, path=path, result="success" if ok else "failure").inc()
        if ok:
            self._render_time.labels(format=name, path=path).set(self._wall())

    def count(self, via: str) -> None:
        """``localapi`` COUNT: someone asked for a token through ``via``."""
        child = self._by_via.get(via)
        if child is None:  # on the request path: resolve the labelled child once per ``via``
            child = self._by_via[via] = self._token_requests.labels(via=via)
        child.inc()
