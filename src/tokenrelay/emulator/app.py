"""The emulator in one aiohttp application: OIDC issuer, token service and API, composed here.

``Emulator`` holds the parts and offers a Python face for setting up data (``tokenrelay dev``, tests,
benchmarks); ``EmulatorServer`` binds it to a loopback port (0 picks a free one) and fixes the base
URL, which is also the issuer URL, before the first request can arrive.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from ..lite.aip193 import Code
from ..lite.netloc import is_loopback
from ..serving.site import ServingSite
from . import api
from .errors import STS_DOMAIN, ApiError, invalid_argument, invalid_arguments, permission_denied, routing
from .grpcapi.listener import dual
from .iam import groups, identities, identity_providers, repos, role_bindings
from .iam.access import ROLE_BY_NAME
from .iam.advisories import create_advisory
from .iam.kinds import Advisory, Group, Identity, Repo, RoleBinding
from .iam.resources import Resources
from .iam.store import Store
from .inputs import MAX_BODY, MAX_QUERY_VALUE, Fields, check_query, json_body
from .malformed import http1_factory
from .pagetoken import PageTokens
from .platforms.registry import PLATFORMS, PLAYED_ISSUERS, PlatformEndpoints
from .platforms.registry import mint as mint_as
from .registry import Registry
from .registry import add_routes as add_registry_routes
from .sts.exchange import STS_PATH, TokenService
from .sts.issuer import DISCOVERY_PATH, JWKS_PATH, Issuer, SigningKey
from .sts.oidc import OidcVerifier, normalize

if TYPE_CHECKING:
    from .grpcapi.h2server import Http2Service
    from .platforms.spiffe import WorkloadApi

log = logging.getLogger("tokenrelay.emulator")

MINT_PATH = "/emulator/v1/mint"
ADVISORY_SEED_PATH = "/emulator/v1/advisories"
SESSION = web.AppKey("emulator_session", aiohttp.ClientSession)


@dataclass(frozen=True, slots=True)
class Workload:
    """What ``Emulator.workload`` set up: an identity bound to a role on a group."""

    group: Group
    identity: Identity
    binding: RoleBinding
    subject: str


class Emulator:
    """Issuer, token service and API over one store."""

    def __init__(
        self,
        store: Store | None = None,
        *,
        token_lifetime: float = 3600.0,
        trusted_issuers: Iterable[str] = (),
        api_audiences: Iterable[str] = (),
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.store = store or Store()
        self.wall = wall
        self._base_url = ""
        self._extra_audiences = frozenset(normalize(a) for a in api_audiences)
        self._audiences = self._extra_audiences
        self.resources = Resources(self.store, wall)
        self.issuer = Issuer(SigningKey.stored(self.store, "issuer"), lambda: self._base_url, wall)
        self._session: aiohttp.ClientSession | None = None
        self.verifier = OidcVerifier(
            self.issuer, trusted_issuers, session=self._client, wall=wall, played=PLAYED_ISSUERS
        )
        self.platforms = PlatformEndpoints(self.issuer, wall=wall, verify=self.verifier.verify)
        self.workload_api: WorkloadApi | None = None  # the SPIFFE socket, when an EmulatorServer serves one
        self.tokens = TokenService(
            self.store,
            SigningKey.stored(self.store, "sts"),
            self.verifier,
            lambda: self._base_url,
            audiences=lambda: self._audiences,
            trusted_for=lambda identity_uid: identity_providers.trusted_issuers(self.store, identity_uid),
            lifetime=token_lifetime,
            wall=wall,
        )
        self.page_tokens = PageTokens.stored(self.store)
        self.registry = Registry(self.store, self.resources, lambda: self._base_url, wall=wall)

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT``: the API's base URL, the auth URL and the issuer URL at once."""
        if not self._base_url:
            raise RuntimeError("the emulator has no address yet: start an EmulatorServer first")
        return self._base_url

    @base_url.setter
    def base_url(self, url: str) -> None:
        self._base_url = normalize(url)
        self._audiences = self._extra_audiences | {self._base_url}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        self.registry.close()
        if self._session is not None:
            await self._session.close()

    # -- the Python face ------------------------------------------------------------------------

    def organization(self, name: str, description: str = "") -> Group:
        return groups.create(self.resources, "", {"name": name, "description": description})

    def workload(self, group_uid: str, subject: str, role: str = "owner", name: str = "workload") -> Workload:
        """An identity in ``group_uid`` matching this issuer and ``subject``, bound to ``role`` there."""
        identity = identities.create(
            self.resources,
            group_uid,
            {"name": name, "claimMatch": {"issuer": self.issuer.url, "subject": subject}},
        )
        binding = role_bindings.create(
            self.resources, group_uid, {"identityUid": identity.uid, "roleUid": ROLE_BY_NAME[role].uid}
        )
        return Workload(groups.get(self.resources, group_uid), identity, binding, subject)

    def repo(self, group_uid: str, name: str) -> Repo:
        return repos.create(self.resources, group_uid, name)

    def advisory(self, repo_uid: str, fields: dict[str, object]) -> Advisory:
        """Seed an advisory about a repo (the API has no create for them): ``vulnerabilityId``,
        ``package`` (required), ``aliases``, ``severity``, ``status``, ``fixedVersion``, ``summary``."""
        return create_advisory(self.resources, repo_uid, fields)

    def mint(self, subject: str, audience: str | None = None, lifetime: float = 3600.0) -> str:
        """A platform OIDC token from this emulator's issuer."""
        return self.issuer.mint(subject, audience or self.base_url, lifetime)

    def api_token(self, identity_uid: str, lifetime: float | None = None) -> str:
        """An API token for this API, as the token service would issue it."""
        return self.tokens.mint(identity_uid, self.base_url, lifetime)

    # -- HTTP -----------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_errors], client_max_size=MAX_BODY)
        app[api.CONTEXT] = api.Context(
            self.resources, self.tokens, lambda: self._audiences, self.wall, self.page_tokens
        )
        app.router.add_get(DISCOVERY_PATH, self._discovery)
        app.router.add_get(JWKS_PATH, self._jwks)
        app.router.add_get(STS_PATH + "/exchange", self._exchange)
        app.router.add_post(STS_PATH + "/exchange", self._exchange)
        app.router.add_post(MINT_PATH, self._mint)
        app.router.add_post(ADVISORY_SEED_PATH + "/{uid:.+}", self._seed_advisory)
        self.platforms.add_routes(app, _loopback_only)
        api.add_routes(app)
        add_registry_routes(app, self.registry)
        app.cleanup_ctx.append(self._lifespan)
        return app

    async def _lifespan(self, app: web.Application) -> AsyncIterator[None]:
        yield
        await self.close()

    async def _discovery(self, request: web.Request) -> web.Response:
        check_query(request, (), STS_DOMAIN)
        return api.respond(self.issuer.discovery())

    async def _jwks(self, request: web.Request) -> web.Response:
        check_query(request, (), STS_DOMAIN)
        return api.respond(self.issuer.jwks())

    async def _exchange(self, request: web.Request) -> web.Response:
        fields = check_query(request, EXCHANGE_FIELDS, STS_DOMAIN)
        if request.method == "POST" and request.body_exists:
            if request.content_type != "application/x-www-form-urlencoded":
                raise invalid_argument(
                    "Content-Type",
                    "send aud and identity in the query, or as application/x-www-form-urlencoded",
                    STS_DOMAIN,
                )
            fields.update(await _form(request, fields))
        scheme, _, bearer = request.headers.get("Authorization", "").partition(" ")
        token = await self.tokens.exchange(
            bearer.strip() if scheme.lower() == "bearer" else None, fields.get("aud"), fields.get("identity")
        )
        return api.respond({"token": token})

    async def _mint(self, request: web.Request) -> web.Response:
        """Platform tokens on demand (``tokenrelay emulate mint``); loopback callers only."""
        _loopback_only(request, "minting")
        check_query(request, (), STS_DOMAIN)
        # a null field is an absent one: the emulator's URL, the platform's own subject, an hour
        body = {
            name: value for name, value in (await json_body(request, STS_DOMAIN)).items() if value is not None
        }
        fields = Fields(body, ("sub", "aud", "lifetime", "platform"), STS_DOMAIN)
        platform = fields.text("platform", limit=64)
        subject = fields.text("sub", required=not platform, limit=1024)
        audience = fields.text("aud", limit=2048)
        lifetime = body.get("lifetime", 3600)
        if (
            isinstance(lifetime, bool)
            or not isinstance(lifetime, int | float)
            or not 0 < lifetime <= 7 * 86400
        ):
            fields.add("lifetime", "seconds, more than 0 and at most a week")
        if platform and platform not in PLATFORMS:
            fields.add("platform", f"one of {', '.join(PLATFORMS)}")
        fields.check()
        if platform:
            more = {"sub": subject} if subject else None
            token = mint_as(self.issuer, platform, audience or self.base_url, lifetime, more)
        else:
            token = self.issuer.mint(subject, audience or self.base_url, lifetime)
        return api.respond({"token": token})

    async def _seed_advisory(self, request: web.Request) -> web.Response:
        """Advisories have no create in the API: the operator seeds them here; loopback callers only."""
        _loopback_only(request, "seeding advisories")
        check_query(request, (), STS_DOMAIN)
        body = await json_body(request, STS_DOMAIN)
        return api.respond(self.advisory(request.match_info["uid"], body).v2())


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
EXCHANGE_FIELDS = ("aud", "identity")


def _loopback_only(request: web.Request, what: str) -> None:
    if request.remote is None or not is_loopback(request.remote):
        raise permission_denied(f"Permission denied: {what} is open to loopback callers only", STS_DOMAIN)


async def _form(request: web.Request, query: dict[str, str]) -> dict[str, str]:
    """The exchange's form fields: only aud and identity, once each, bounded like the query."""
    try:
        form = await request.post()
    except web.HTTPRequestEntityTooLarge:
        raise invalid_argument("body", f"larger than {MAX_BODY} bytes", STS_DOMAIN) from None
    except (ValueError, LookupError):  # undecodable bytes, an unknown charset
        raise invalid_argument("body", "not a URL-encoded form in UTF-8", STS_DOMAIN) from None
    violations = []
    fields: dict[str, str] = {}
    for name in sorted(set(form)):
        values = form.getall(name)
        value = values[0]
        if name not in EXCHANGE_FIELDS:
            violations.append((name, "unknown field; the exchange accepts: aud, identity"))
        elif len(values) > 1 or name in query:
            violations.append((name, "given more than once"))
        elif not isinstance(value, str) or len(value) > MAX_QUERY_VALUE:
            violations.append((name, f"must be text of at most {MAX_QUERY_VALUE} characters"))
        else:
            fields[name] = value
    if violations:
        raise invalid_arguments(violations, STS_DOMAIN)
    return fields


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every refusal as an AIP-193 body, aiohttp's own 404/405 included."""
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _routing_error(request, exc).response(exc.status)
    except Exception:
        # A bug in the emulator: still an AIP-193 body, so a client under test sees the shape it
        # handles; the traceback goes to the log at debug level only.
        log.debug("emulator handler crashed", exc_info=True, extra={"path": request.path})
        error = ApiError(Code.INTERNAL, f"Internal error: {request.method} {request.path}")
        return web.Response(
            status=500, body=json.dumps(error.body()).encode(), content_type="application/json"
        )


def _routing_error(request: web.Request, exc: web.HTTPException) -> ApiError:
    """aiohttp's own refusals (unknown path, wrong method, body too large) in the full AIP-193 shape."""
    where = f"{request.method} {request.path}"
    if exc.status == 413:
        return invalid_argument("body", f"larger than {MAX_BODY} bytes")
    if exc.status == 405:
        allowed = sorted(getattr(exc, "allowed_methods", ()))
        error = routing(
            Code.UNIMPLEMENTED,
            f"Unimplemented: {where}: this path answers {', '.join(allowed)}",
            request.path,
        )
        error.headers["Allow"] = ",".join(allowed)
        return error
    if exc.status == 404:
        return routing(Code.NOT_FOUND, f"Not found: {where}: no such path in this API", request.path)
    return routing(
        Code.INVALID_ARGUMENT if exc.status < 500 else Code.UNKNOWN, f"{exc.reason}: {where}", request.path
    )


class EmulatorServer:
    """The emulator on a TCP port; ``port=0`` picks a free one. Also an async context manager."""

    def __init__(
        self,
        emulator: Emulator,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        grpc: bool = True,
        spiffe_socket: str | None = None,
    ) -> None:
        self.emulator = emulator
        self._host = host
        self._port = port
        self._grpc = grpc
        self._spiffe_socket = spiffe_socket
        self._runner: web.AppRunner | None = None
        self._http2: Http2Service | None = None

    @property
    def url(self) -> str:
        return self.emulator.base_url

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server((self._host, self._port), family=family, backlog=1024)
        host, port = sock.getsockname()[:2]
        self.emulator.base_url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self._runner = web.AppRunner(self.emulator.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        if self._grpc:
            # h2 and protobuf: loaded only when an emulator serves, never by tokenrelay run
            from .grpcapi.h2server import Http2Service

            self._http2 = Http2Service(lambda: self.emulator.base_url)
            await ServingSite(self._runner, sock, dual(self._http2.protocol)).start()
        else:
            await ServingSite(self._runner, sock, http1_factory).start()
        if self._spiffe_socket is not None:
            # grpcio (the spiffe extra): loaded only when a Workload API socket is asked for
            from .platforms.spiffe import WorkloadApi

            self.emulator.workload_api = WorkloadApi(self._spiffe_socket, self.emulator.platforms.mint_spiffe)
            await self.emulator.workload_api.start()
        log.info("emulator listening", extra={"url": self.emulator.base_url, "grpc": self._grpc})

    async def stop(self) -> None:
        if self.emulator.workload_api is not None:
            await self.emulator.workload_api.stop()
            self.emulator.workload_api = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._http2 is not None:
            await self._http2.close()
            self._http2 = None

    async def __aenter__(self) -> EmulatorServer:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
