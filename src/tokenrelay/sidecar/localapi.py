"""The local API served over the Unix socket: the current token, the sidecar's status, liveness and
readiness (``probes``), and ``SocketServer``, the daemon Component that serves it.

``GET /v1/token[?audience=AUD]`` answers ``{"token", "expireTime", "audience"}``, or with ``Accept:
text/plain`` the bare token and its expiry in Unix seconds in a ``Token-Expires-At`` header; refusals
are AIP-193 bodies like the upstream's, so one client code path handles both. ``quicktoken`` answers
the same request, when a token is held, before aiohttp parses it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..errors import TokenUnavailable, UnknownAudience
from ..lite import aip193
from ..lite.aip193 import Code
from ..lite.names import EXPIRES_HEADER
from ..servingsite import ServingSite
from ..tokens.token import Token, TokenSource
from . import probes, quicktoken, unixsocket

if TYPE_CHECKING:
    from .settings import Settings

TOKENS = web.AppKey("tokens", TokenSource)
COUNT: web.AppKey[Callable[[str], None]] = web.AppKey("count")
BODIES: web.AppKey[EncodedTokens] = web.AppKey("bodies")
STATUS: web.AppKey[Callable[[], dict[str, Any]]] = web.AppKey("status")

_NO_STORE = {"Cache-Control": "no-store"}
# Whole header sets, so that aiohttp does not parse a content_type argument on every answer.
_JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store"}
_TEXT_HEADERS = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}


def error_response(status: int, code: Code, message: str, reason: str) -> web.Response:
    return web.Response(
        status=status,
        body=aip193.encode(code, message, reason),
        content_type="application/json",
        headers=_NO_STORE,
    )


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


def render(token: Token, accept: str, bodies: EncodedTokens) -> tuple[bytes, Mapping[str, str]]:
    """The body and headers of a 200 carrying ``token``: JSON, or the bare token as text/plain with
    its expiry in a header when the client asked for that."""
    if _wants_text(accept):
        return token.value.encode(), {**_TEXT_HEADERS, EXPIRES_HEADER: str(int(token.expire_wall))}
    return bodies.body(token), _JSON_HEADERS


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


class EncodedTokens:
    """The JSON answer for each audience's current token, encoded once per token, not per request."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[Token, bytes]] = {}

    def body(self, token: Token) -> bytes:
        cached = self._cache.get(token.audience)
        if cached is not None and cached[0] is token:
            return cached[1]
        payload = {"token": token.value, "expireTime": token.expire_time, "audience": token.audience}
        encoded = json.dumps(payload).encode()
        self._cache[token.audience] = (token, encoded)
        return encoded


async def get_status(request: web.Request) -> web.Response:
    """The sidecar's state (see ``status``): fingerprints and times, never a token."""
    return web.json_response(request.app[STATUS](), headers=_NO_STORE)


def _wants_text(accept: str) -> bool:
    """True when the client asked for text/plain rather than JSON."""
    return "text/plain" in accept and "application/json" not in accept


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
            from . import peercred  # only with --socket-allow-uid/gid: idle memory is the budget

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
