"""The agent's local API: ``GET /v1/token?audience=AUD&identity=UID`` with the pod's token as
``Authorization: Bearer``, answered as the sidecar answers (``sidecar.localapi.render``), refused in
its AIP-193 shape (docs/agent.md has the table). The pod's token is verified before anything else;
the token service's own refusal reaches the pod in its words, and nothing falls back to another
identity."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

from aiohttp import web

from ..errors import ExchangeError, IdTokenError, TokenUnavailable
from ..lite.aip193 import Code
from ..lite.names import IDENTITY_ENV
from ..serving import probes
from ..serving.tokenanswer import EncodedTokens, error_response, render
from .exchanges import Exchanges, Key
from .metrics import AgentMetrics
from .pods import NodePods
from .podtoken import Refused, Verifier


class ConnectionRates:
    """At most ``rate`` requests a second on one connection (GCRA, a second's burst)."""

    def __init__(self, rate: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = 1.0 / rate
        self._clock = clock
        # per transport: the theoretical arrival time of its next request; gone with the connection
        self._tat: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()

    def allow(self, connection: object) -> bool:
        now = self._clock()
        tat = max(self._tat.get(connection, now), now)
        if tat - now > 1.0 - self._interval + 1e-9:  # 1e-9: float sums of the interval
            return False
        self._tat[connection] = tat + self._interval
        return True


class Agent:
    """What the handler needs, wired in ``service``."""

    def __init__(
        self,
        verifier: Verifier,
        pods: NodePods,
        exchanges: Exchanges,
        metrics: AgentMetrics,
        rates: ConnectionRates,
        default_audience: str,
    ) -> None:
        self.verifier = verifier
        self.pods = pods
        self.exchanges = exchanges
        self.metrics = metrics
        self.rates = rates
        self.default_audience = default_audience
        self.bodies = EncodedTokens()


AGENT: web.AppKey[Agent] = web.AppKey("agent", Agent)


def _refuse(agent: Agent, status: int, code: Code, message: str, reason: str) -> web.Response:
    agent.metrics.refused(reason)
    return error_response(status, code, message, reason)


async def get_token(request: web.Request) -> web.Response:
    agent = request.app[AGENT]
    if request.transport is not None and not agent.rates.allow(request.transport):
        return _refuse(
            agent,
            429,
            Code.RESOURCE_EXHAUSTED,
            "too many requests on this connection: the agent serves the token it holds, ask less often",
            "RATE_LIMITED",
        )
    try:
        pod = await agent.verifier.verify(request.headers.get("Authorization"))
        if not agent.pods.running(pod.pod_uid) and not await agent.pods.wait_for(pod.pod_uid):
            raise Refused(
                "POD_GONE",
                f"pod {pod.namespace}/{pod.pod_name} (uid {pod.pod_uid}) does not run on this node "
                "any more: its token is refused",
            )
    except Refused as refused:
        return _refuse(agent, 401, Code.UNAUTHENTICATED, refused.message, refused.reason)
    query = request.query
    identity = query.get("identity", "")
    if not identity:
        return _refuse(
            agent,
            400,
            Code.INVALID_ARGUMENT,
            f"no identity: set {IDENTITY_ENV} in the pod to the uid of the identity it assumes "
            "(sent as ?identity=)",
            "IDENTITY_MISSING",
        )
    audience = query.get("audience") or agent.default_audience
    agent.exchanges.presented(pod)
    provider = agent.exchanges.provider(Key(pod.namespace, pod.service_account, identity, audience))
    token = provider.current()
    agent.metrics.lookup(hit=token is not None)
    if token is None:
        if isinstance(provider.last_error, IdTokenError):
            provider.refresh_now()  # it failed for want of a pod token: this request brought one
        try:
            token = await provider.get()
        except TokenUnavailable as exc:
            error = provider.last_error
            if isinstance(error, ExchangeError) and error.status is not None and not error.retryable:
                # The service refused this service account that identity (a 403, or a 400/401 about
                # the pod's token or the identity): its words, its reason; never another identity.
                return _refuse(
                    agent, 403, Code.PERMISSION_DENIED, error.message, error.reason or "EXCHANGE_REFUSED"
                )
            return _refuse(agent, 503, Code.UNAVAILABLE, exc.message, "TOKEN_UNAVAILABLE")
    body, headers = render(token, request.headers.get("Accept", ""), agent.bodies)
    return web.Response(body=body, headers=headers)


def create_app(agent: Agent, ready: Callable[[], str | None]) -> web.Application:
    app = web.Application()
    app[AGENT] = agent
    app.router.add_get("/v1/token", get_token)
    probes.health_routes(app, ready)
    return app
