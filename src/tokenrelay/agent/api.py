"""The agent's local API: ``GET /v1/token?audience=AUD&identity=UID`` with the pod's token as
``Authorization: Bearer``, answered as the sidecar answers (``sidecar.localapi.render``), refused in
its AIP-193 shape (``refusals``; docs/agent.md has the table). The pod's token is verified before
anything else; the token service's own refusal reaches the pod in its words, and nothing falls back
to another identity."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ..errors import ExchangeError, IdTokenError, TokenUnavailable
from ..sidecar import probes
from ..sidecar.localapi import EncodedTokens, render
from . import ratelimit, refusals
from .exchanges import Exchanges, Key
from .metrics import AgentMetrics
from .pods import NodePods
from .podtoken import Verifier
from .ratelimit import POD, ConnectionRates, Gcra
from .refusals import Refused


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


def _refuse(agent: Agent, refused: Refused) -> web.Response:
    agent.metrics.refused(refused.reason)
    return refused.answer()


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
            raise refusals.POD_GONE.refuse(namespace=pod.namespace, pod=pod.pod_name, uid=pod.pod_uid)
    except Refused as refused:
        return _refuse(agent, refused)
    request[POD] = pod
    return await handler(request)


async def get_token(request: web.Request) -> web.Response:
    agent = request.app[AGENT]
    pod = request[POD]
    query = request.query
    identity = query.get("identity", "")
    if not identity:
        return _refuse(agent, refusals.IDENTITY_MISSING.refuse())
    key = Key(pod.namespace, pod.service_account, identity, query.get("audience") or agent.default_audience)
    agent.exchanges.presented(pod)
    refusal = agent.exchanges.refusal(key)
    if refusal is not None:  # the service refused this key moments ago: its words, no exchange
        return _refuse(
            agent, refusals.EXCHANGE_REFUSED.refuse(reason=refusal.reason, message=refusal.message)
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
                refused = refusals.EXCHANGE_REFUSED.refuse(reason=error.reason, message=error.message)
                return _refuse(agent, refused)
            return _refuse(agent, refusals.TOKEN_UNAVAILABLE.refuse(message=exc.message))
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
