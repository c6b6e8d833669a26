"""The agent's local API: ``GET /v1/token?audience=AUD&identity=UID`` with the pod's token as
``Authorization: Bearer``, answered as the sidecar answers (``serving.tokenanswer.render``), refused in
its AIP-193 shape (``refusals``; docs/agent.md has the table). Thin, as SPIRE's workload handler
is: the rate limits are middleware (``ratelimit``), who asks and what it may ask are ordered lists
of checks (``checks``), and the handler only maps the exchange's outcome. The token service's own
refusal reaches the pod in its words, and nothing falls back to another identity."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ..errors import ExchangeError, IdTokenError, TokenUnavailable
from ..serving import probes
from ..serving.tokenanswer import EncodedTokens, render
from ..tokens.provider import TokenProvider
from ..tokens.token import Token
from . import ratelimit, refusals
from .checks import Asking, Checks, apply
from .exchanges import Exchanges, Key
from .metrics import AgentMetrics
from .ratelimit import POD, ConnectionRates, Gcra
from .refusals import Refused


class Agent:
    """What the handler and its middleware need, wired in ``service``."""

    def __init__(
        self,
        checks: Checks,
        exchanges: Exchanges,
        metrics: AgentMetrics,
        rates: ConnectionRates,
        pod_rates: Gcra,
    ) -> None:
        self.checks = checks
        self.exchanges = exchanges
        self.metrics = metrics
        self.rates = rates
        self.pod_rates = pod_rates
        self.bodies = EncodedTokens()


AGENT: web.AppKey[Agent] = web.AppKey("agent", Agent)

TOKEN_ROUTE = "token"


def _token_route(request: web.Request) -> bool:
    return request.match_info.route.name == TOKEN_ROUTE


def _refuse(agent: Agent, refused: Refused) -> web.Response:
    agent.metrics.refused(refused.reason)
    return refused.answer()


@web.middleware
async def identify(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Who asks for a token: a verified pod running here (``request[POD]``), or a 401 saying why not."""
    if not _token_route(request):
        return await handler(request)
    agent = request.app[AGENT]
    asking = Asking(request)
    try:
        await apply(agent.checks.caller, asking)
    except Refused as refused:
        return _refuse(agent, refused)
    assert asking.pod is not None  # the caller's checks passed
    request[POD] = asking.pod
    return await handler(request)


async def get_token(request: web.Request) -> web.Response:
    """The verified pod's token: the policy's checks, one call for the key's provider, its token."""
    agent = request.app[AGENT]
    pod = request[POD]
    asking = Asking(request, pod)
    try:
        await apply(agent.checks.policy, asking)
        key = asking.key
        assert key is not None  # the policy's checks passed
        token = await _token(agent, agent.exchanges.provider(pod, key), key)
    except Refused as refused:
        return _refuse(agent, refused)
    body, headers = render(token, request.headers.get("Accept", ""), agent.bodies)
    return web.Response(body=body, headers=headers)


async def _token(agent: Agent, provider: TokenProvider, key: Key) -> Token:
    """The key's token, held or fetched now; raises Refused with the service's words, or 503."""
    token = provider.current()
    agent.metrics.lookup(hit=token is not None)
    if token is not None:
        return token
    if isinstance(provider.last_error, IdTokenError):
        provider.refresh_now()  # it failed for want of a pod token: this request brought one
    try:
        return await provider.get()
    except TokenUnavailable as exc:
        error = provider.last_error
        if isinstance(error, ExchangeError) and error.status is not None and not error.retryable:
            # The service refused this service account that identity (a 403, or a 400/401 about
            # the pod's token or the identity): its words, its reason; never another identity.
            agent.exchanges.refused(key, error)
            raise refusals.EXCHANGE_REFUSED.refuse(reason=error.reason, message=error.message) from None
        raise refusals.TOKEN_UNAVAILABLE.refuse(message=exc.message) from None


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
