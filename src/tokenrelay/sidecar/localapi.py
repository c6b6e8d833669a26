"""The local API served over the Unix socket: the current token, the sidecar's status, liveness and
readiness (``probes``), and ``SocketServer``, the daemon Component that serves it.

``GET /v1/token[?audience=AUD]`` answers ``{"token", "expireTime", "audience"}``, or with ``Accept:
text/plain`` the bare token and its expiry in Unix seconds in a ``Token-Expires-At`` header; refusals
are AIP-193 bodies like the upstream's, so one client code path handles both. ``quicktoken`` answers
the same request, when a token is held, before aiohttp parses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..errors import TokenUnavailable, UnknownAudience
from ..lite.aip193 import Code
from ..serving import probes, unixsocket
from ..serving.site import ServingSite
from ..serving.tokenanswer import NO_STORE, EncodedTokens, error_response, render
from ..tokens.token import TokenSource
from . import quicktoken

if TYPE_CHECKING:
    from .settings import Settings

TOKENS = web.AppKey("tokens", TokenSource)
COUNT: web.AppKey[Callable[[str], None]] = web.AppKey("count")
BODIES: web.AppKey[EncodedTokens] = web.AppKey("bodies")
STATUS: web.AppKey[Callable[[], dict[str, Any]]] = web.AppKey("status")


async def get_token(request: web.Request) -> web.Response:
    app = request.app
    tokens = app[TOKENS]
    app[COUNT]("socket")
    # Parsing the query costs a tenth of a request: skip it when there is none.
    audience = (request.query_string and request.query.get("audience")) or tokens.audiences[0]
    token = tokens.current(audience)
    if token is None:
        try:
            token = await tokens.get(audience)
        except UnknownAudience as exc:
            return error_response(404, Code.NOT_FOUND, exc.message, "AUDIENCE_NOT_CONFIGURED")
        except TokenUnavailable as exc:
            return error_response(503, Code.UNAVAILABLE, exc.message, "TOKEN_UNAVAILABLE")
    body, headers = render(token, request.headers.get("Accept", ""), app[BODIES])
    return web.Response(body=body, headers=headers)


def quick_answer(app: web.Application) -> quicktoken.Answer:
    """``get_token`` for a token held right now, for ``quicktoken``: the same count, the same
    audience, the same answer; None whenever ``get_token`` would have to wait or refuse."""
    tokens, count, bodies = app[TOKENS], app[COUNT], app[BODIES]

    def answer(audience: str | None, accept: str) -> tuple[bytes, Mapping[str, str]] | None:
        token = tokens.current(audience or tokens.audiences[0])
        if token is None:
            return None
        count("socket")
        return render(token, accept, bodies)

    return answer


async def get_status(request: web.Request) -> web.Response:
    """The sidecar's state (see ``status``): fingerprints and times, never a token."""
    return web.json_response(request.app[STATUS](), headers=NO_STORE)


def create_app(
    tokens: TokenSource,
    ready: Callable[[], str | None],
    count: Callable[[str], None] = lambda via: None,
    status: Callable[[], dict[str, Any]] | None = None,
) -> web.Application:
    app = web.Application()
    app[TOKENS] = tokens
    app[COUNT] = count
    app[BODIES] = EncodedTokens()
    app.router.add_get("/v1/token", get_token)
    if status is not None:
        app[STATUS] = status
        app.router.add_get("/v1/status", get_status)
    probes.health_routes(app, ready)
    return app


class SocketServer:
    """The local API on the Unix socket: a daemon Component in front of any TokenSource."""

    def __init__(
        self,
        settings: Settings,
        tokens: TokenSource,
        ready: Callable[[], str | None],
        count: Callable[[str], None] = lambda via: None,
        status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._settings = settings
        self._app = create_app(tokens, ready, count, status)
        self._runner = web.AppRunner(
            self._app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=settings.shutdown_grace,
        )
        self._inode: int | None = None

    async def start(self) -> None:
        sock = unixsocket.bind(self._settings.socket, self._settings.socket_mode)
        self._inode = unixsocket.inode(self._settings.socket)
        await self._runner.setup()
        answer = quick_answer(self._app)
        policy = None
        if self._settings.socket_allow_uid or self._settings.socket_allow_gid:
            from ..serving import peercred  # only with --socket-allow-uid/gid: idle memory is the budget

            policy = peercred.Policy(self._settings.socket_allow_uid, self._settings.socket_allow_gid)
            refusals = peercred.RefusalLog()

        def protocols(http: web.Server) -> Callable[[], asyncio.BaseProtocol]:
            """Each connection: the peer check (when asked for), then the token shortcut, then aiohttp."""

            def quick() -> asyncio.BaseProtocol:
                return quicktoken.QuickToken(http, answer)

            if policy is None:
                return quick
            return lambda: peercred.PeerGate(quick, policy, refusals)

        site = ServingSite(self._runner, sock, protocols)
        await site.start()

    async def stop(self) -> None:
        # Unlink first so that new clients fail fast instead of reaching a closing server.
        if self._inode is not None:
            unixsocket.remove(self._settings.socket, self._inode)
        await self._runner.cleanup()
