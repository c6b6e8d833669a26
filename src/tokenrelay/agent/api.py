"""The agent's local API: ``GET /v1/token?audience=AUD&identity=UID`` with the pod's token as
``Authorization: Bearer``, answered as the sidecar answers (``sidecar.localapi.render``), refused in
its AIP-193 shape (docs/agent.md has the table). The pod's token is verified before anything else;
the token service's own refusal reaches the pod in its words, and nothing falls back to another
identity."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ..errors import ExchangeError, IdTokenError, TokenUnavailable
from ..lite.aip193 import Code
from ..lite.names import IDENTITY_ENV
from ..serving import probes
from ..serving.tokenanswer import EncodedTokens, error_response, render
from . import ratelimit
from .exchanges import Exchanges, Key
from .metrics import AgentMetrics
from .pods import NodePods
from .podtoken import Refused, Verifier
from .ratelimit import POD, ConnectionRates, Gcra


class Agent:
    """What the handler needs, wired in ``service``."""

    def __init__(
        self,
        verifier: Verifier,
        pods: NodePods,
        exchanges: Exchanges,
        metrics: AgentMetrics,
        rates: ConnectionRates,
        pod_rates: Gcra,
        default_audience: str,
    ) -> None:
        self.verifier = verifier
        self.pods = pods
        self.exchanges = exchanges
        self.metrics = metrics
        self.rates = rates
        self.pod_rates = pod_rates
        self.default_audience = default_audience
        self.bodies = EncodedTokens()


AGENT: web.AppKey[Agent] = web.AppKey("agent", Agent)


def _refuse(agent: Agent, status: int, code: Code, message: str, reason: str) -> web.Response:
    agent.metrics.refused(reason)
    return error_response(status, code, message, reason)


TOKEN_ROUTE = "token"


def _token_route(request: web.Request) -> bool:
    return request.match_info.route.name == TOKEN_ROUTE


@web.middleware
async def identify(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Who asks for a token: a verified pod running here (``request[POD]``), or a 401 saying why not."""
    if not _token_route(request):
        return await handler(request)
    agent = request.app[AGENT]
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
    request[POD] = pod
    return await handler(request)


async def get_token(request: web.Request) -> web.Response:
    agent = request.app[AGENT]
    pod = request[POD]
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
    key = Key(pod.namespace, pod.service_account, identity, query.get("audience") or agent.default_audience)
    agent.exchanges.presented(pod)
    refusal = agent.exchanges.refusal(key)
    if refusal is not None:  # the service refused this key moments ago: its words, no exchange
        return _refuse(
            agent, 403, Code.PERMISSION_DENIED, refusal.message, refusal.reason or "EXCHANGE_REFUSED"
        )
    provider = agent.exchanges.provider(key)
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
                agent.exchanges.refused(key, error)
                return _refuse(
                    agent, 403, Code.PERMISSION_DENIED, error.message, error.reason or "EXCHANGE_REFUSED"
                )
            return _refuse(agent, 503, Code.UNAVAILABLE, exc.message, "TOKEN_UNAVAILABLE")
    body, headers = render(token, request.headers.get("Accept", ""), agent.bodies)
    return web.Response(body=body, headers=headers)


def create_app(
    agent: Agent, ready: Callable[[], str | None], middlewares: Iterable[Middleware] = ()
) -> web.Application:
    """The API; ``middlewares`` come first (the connections' bookkeeping), then the rate limits
    around the pod's identification: per connection before it, per pod after."""
    refused = agent.metrics.refused
    app = web.Application(
        middlewares=(
            *middlewares,
            ratelimit.per_connection(agent.rates, refused, _token_route),
            identify,
            ratelimit.per_pod(agent.pod_rates, refused),
        )
    )
    app[AGENT] = agent
    app.router.add_get("/v1/token", get_token, name=TOKEN_ROUTE)
    probes.health_routes(app, ready)
    return app
