"""The OCI distribution API on ``/v2/``, and its token endpoint, on the emulator's own port.

The standard bearer flow: ``/v2/`` without a registry token answers 401 with
``WWW-Authenticate: Bearer realm="<emulator>/v2/token",service="<host:port>"``; the realm takes HTTP
Basic ``_token`` + a live API token (what ``docker-credential-tokenrelay`` answers) and grants the
requested actions the identity's role bindings allow. A request the token does not cover answers 401
with ``error="insufficient_scope"`` when the identity could get the right (ask again with that scope)
and 403 ``DENIED`` when it could not.

Every answer under ``/v2/`` is the spec's error JSON, unknown paths and methods included: these
handlers never let an exception reach the API's AIP-193 middleware.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ...lite.jwtclaims import numeric_claim, unverified_claims
from ...lite.timestamps import format_timestamp
from .. import api
from ..errors import ApiError
from .errors import API_VERSION_HEADER, RegistryError
from .manifests import validate
from .names import ImageName, Route, check_digest, check_tag, is_digest, parse_name, route
from .regtoken import ACTIONS, TOKEN_PATH, USERNAME, Grant, Scope, basic_credentials, parse_scopes
from .service import PULL_ROLE, PUSH_ROLE, Registry, Session

CHUNK = 1 << 16
MAX_TAGS_PAGE = 1000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_NEEDS = {"GET": "pull", "HEAD": "pull", "POST": "push", "PATCH": "push", "PUT": "push", "DELETE": "delete"}
_METHODS = {
    "tags": ("GET", "HEAD"),
    "manifest": ("GET", "HEAD", "PUT", "DELETE"),
    "upload": ("POST", "GET", "PATCH", "PUT", "DELETE"),
    "blob": ("GET", "HEAD", "DELETE"),
}


def _registry_answers(handler: Handler) -> Handler:
    """Registry errors as the spec's JSON, and the API version header on every answer."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            response = await handler(request)
        except RegistryError as exc:
            return exc.response()
        response.headers.update(API_VERSION_HEADER)
        return response

    return wrapped


def _location(name: ImageName, tail: str) -> str:
    return f"/v2/{name.full}/{tail}"


class Distribution:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def add_routes(self, app: web.Application) -> None:
        r = app.router
        r.add_route("GET", TOKEN_PATH, _registry_answers(self.token))
        r.add_route("POST", TOKEN_PATH, _registry_answers(self.token))
        r.add_route("*", "/v2/", _registry_answers(self.version_check))
        r.add_route("*", "/v2", _registry_answers(self.version_check))
        r.add_route("*", "/v2/{tail:.+}", _registry_answers(self.dispatch))

    # -- authentication -------------------------------------------------------------------------------

    def _challenge(self, scope: str | None, why: str = "", insufficient: bool = False) -> RegistryError:
        params = f'realm="{self.registry.realm}",service="{self.registry.service}"'
        if scope:
            params += f',scope="{scope}"'
        if insufficient:
            params += ',error="insufficient_scope"'
        return RegistryError("UNAUTHORIZED", why, headers={"WWW-Authenticate": f"Bearer {params}"})

    def _grant(self, request: web.Request, scope: str | None) -> Grant:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise self._challenge(scope, f"get a registry token at {self.registry.realm}")
        grant = self.registry.tokens.verify(token.strip(), self.registry.service)
        if grant is None:
            raise self._challenge(scope, "the registry token is expired or not one this registry issued")
        return grant

    def _authorize(self, request: web.Request, name: ImageName, action: str) -> Grant:
        wanted = "pull,push" if action == "push" else action
        scope = f"repository:{name.full}:{wanted}"
        grant = self._grant(request, scope)
        if grant.allows(name.full, action):
            return grant
        if action in self.registry.rights(grant.identity, name):
            raise self._challenge(
                scope, f"the token does not cover {action} on {name.full}", insufficient=True
            )
        role = PULL_ROLE if action == "pull" else PUSH_ROLE
        raise RegistryError(
            "DENIED",
            f"{action} on {name.full} needs the {role} role or better on its group (or the "
            f"organization {name.org!r}, for a new repo)",
            detail=[{"Type": "repository", "Name": name.full, "Action": action}],
        )

    async def version_check(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise RegistryError("UNSUPPORTED", f"{request.method} {request.path}")
        self._grant(request, None)
        return web.json_response({})

    async def token(self, request: web.Request) -> web.StreamResponse:
        """The realm: Basic ``_token`` + an API token in, a registry token for the granted scopes out."""
        credentials, scopes, service = await self._token_request(request)
        basic = {"WWW-Authenticate": f'Basic realm="{self.registry.realm}"'}
        if credentials is None:
            raise RegistryError(
                "UNAUTHORIZED",
                f"send HTTP Basic credentials: username {USERNAME}, password an API token "
                "(docker-credential-tokenrelay answers exactly that)",
                headers=basic,
            )
        username, api_token = credentials
        if username != USERNAME:
            raise RegistryError("UNAUTHORIZED", f"the username must be {USERNAME}", headers=basic)
        if service is not None and service != self.registry.service:
            raise RegistryError(
                "UNSUPPORTED",
                f"service {service[:100]!r} is not this registry; ask for {self.registry.service!r}",
                status=400,
            )
        ctx = request.app[api.CONTEXT]
        try:
            identity = ctx.tokens.verify(api_token, ctx.audiences() | {self.registry.service})
        except ApiError as exc:
            raise RegistryError(
                "UNAUTHORIZED", exc.message.removeprefix("Unauthenticated: "), headers=basic
            ) from None
        access: list[dict[str, Any]] = []
        for scope in scopes:
            actions = self._granted(identity, scope.type, scope.name, scope.actions)
            if actions:
                access.append({"type": "repository", "name": scope.name, "actions": actions})
        not_after = numeric_claim(unverified_claims(api_token) or {}, "exp") or 0.0
        token, expires_in = self.registry.tokens.mint(identity, self.registry.service, access, not_after)
        issued = format_timestamp(ctx.wall())
        return web.json_response(
            {"token": token, "access_token": token, "expires_in": expires_in, "issued_at": issued}
        )

    async def _token_request(
        self, request: web.Request
    ) -> tuple[tuple[str, str] | None, list[Scope], str | None]:
        """Credentials, scopes and service: from the query and Basic header (GET, as docker and
        containers/image ask), or from an OAuth2 password-grant form (POST, as containerd asks)."""
        credentials = basic_credentials(request.headers.get("Authorization", ""))
        scopes = parse_scopes(request.query.getall("scope", []))
        service = request.query.get("service")
        if request.method == "POST":
            form = await request.post()
            grant_type = form.get("grant_type")
            if grant_type != "password":
                raise RegistryError(
                    "UNSUPPORTED", f"grant_type {grant_type!r}: only 'password' is offered", status=400
                )
            username, password = form.get("username"), form.get("password")
            if isinstance(username, str) and isinstance(password, str):
                credentials = (username, password)
            scopes += parse_scopes(v for v in form.getall("scope", []) if isinstance(v, str))
            field = form.get("service")
            service = field if isinstance(field, str) else service
        return credentials, scopes, service

    def _granted(self, identity: str, kind: str, name: str, asked: tuple[str, ...]) -> list[str]:
        """The subset of ``asked`` that ``identity`` holds (the token spec: grant less, never refuse)."""
        if kind != "repository":
            return []
        try:
            image = parse_name(name)
        except RegistryError:
            return []
        rights = self.registry.rights(identity, image)
        return [action for action in asked if action in rights and action in (*ACTIONS, "*")]

    # -- /v2/<name>/... -------------------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        target = route(request.path)
        if target is None:
            raise RegistryError(
                "UNSUPPORTED", f"no such endpoint: {request.method} {request.path}", status=404
            )
        if request.method not in _METHODS[target.kind]:
            raise RegistryError("UNSUPPORTED", f"{request.method} on {request.path}")
        action = "push" if target.kind == "upload" else _NEEDS[request.method]
        grant = self._authorize(request, target.name, action)
        handlers = {
            "tags": self.tags_list,
            "manifest": self.manifest,
            "upload": self.upload,
            "blob": self.blob,
        }
        return await handlers[target.kind](request, target, grant)

    def _repo_uid(self, name: ImageName, grant: Grant) -> str:
        repo = self.registry.repo(name, grant.identity)
        if repo is None:
            raise RegistryError("NAME_UNKNOWN", f"{name.full} has not been pushed")
        return repo.uid

    # tags

    async def tags_list(self, request: web.Request, target: Route, grant: Grant) -> web.StreamResponse:
        repo = self._repo_uid(target.name, grant)
        names = sorted(tag.name for tag in self.registry.catalog.tags_of(repo))
        last = request.query.get("last")
        if last:
            names = [n for n in names if n > last]
        raw_n = request.query.get("n")
        headers = {}
        if raw_n is not None:
            if not raw_n.isdigit():
                raise RegistryError("PAGINATION_NUMBER_INVALID", f"n={raw_n[:20]!r} is not a whole number")
            n = min(int(raw_n), MAX_TAGS_PAGE)
            if len(names) > n and n > 0:
                headers["Link"] = (
                    f'<{_location(target.name, "tags/list")}?n={n}&last={names[n - 1]}>; rel="next"'
                )
            names = names[:n]
        return web.json_response({"name": target.name.full, "tags": names}, headers=headers)

    # manifests

    async def manifest(self, request: web.Request, target: Route, grant: Grant) -> web.StreamResponse:
        if request.method == "PUT":
            return await self._put_manifest(request, target, grant)
        repo = self._repo_uid(target.name, grant)
        catalog = self.registry.catalog
        if is_digest(target.ref):
            manifest = catalog.manifest(repo, check_digest(target.ref))
        else:
            tag = catalog.tag(repo, check_tag(target.ref))
            manifest = None if tag is None else catalog.manifest(repo, tag.digest)
        if manifest is None:
            raise RegistryError("MANIFEST_UNKNOWN", f"{target.name.full} has no {target.ref}")
        if request.method == "DELETE":
            if is_digest(target.ref):
                catalog.remove_manifest(repo, manifest.digest)
            else:
                tag = catalog.tag(repo, target.ref)
                assert tag is not None
                catalog.remove_tag(tag)
            return web.Response(status=202)
        headers = {"Docker-Content-Digest": manifest.digest}
        return web.Response(
            body=self.registry.blobs.read(manifest.digest), content_type=manifest.media_type, headers=headers
        )

    async def _put_manifest(self, request: web.Request, target: Route, grant: Grant) -> web.StreamResponse:
        limit = self.registry.blobs.limits.max_manifest
        reference = check_digest(target.ref) if is_digest(target.ref) else check_tag(target.ref)
        body = bytearray()
        async for chunk in request.content.iter_chunked(CHUNK):
            body += chunk
            if len(body) > limit:
                raise RegistryError("SIZE_INVALID", f"a manifest may hold at most {limit} bytes", status=413)
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if is_digest(reference) and digest != reference:
            raise RegistryError("DIGEST_INVALID", f"the manifest hashes to {digest}, not {reference}")
        existing = self.registry.repo(target.name, grant.identity)
        held = existing.uid if existing is not None else ""  # "" holds nothing
        catalog, blobs = self.registry.catalog, self.registry.blobs

        def blob_size(d: str) -> int | None:
            return blobs.size(d) if catalog.linked(held, d) else None

        def manifest_size(d: str) -> int | None:
            found = catalog.manifest(held, d)
            return None if found is None else found.size

        media_type = validate(bytes(body), request.headers.get("Content-Type"), blob_size, manifest_size)
        # only now, so that a refused manifest leaves no empty repo behind
        repo = (
            existing.uid
            if existing is not None
            else self.registry.ensure_repo(target.name, grant.identity).uid
        )
        blobs.put(bytes(body))
        manifest = catalog.put_manifest(repo, digest, media_type, len(body))
        if not is_digest(reference):
            catalog.set_tag(repo, reference, manifest)
        headers = {"Location": _location(target.name, f"manifests/{digest}"), "Docker-Content-Digest": digest}
        return web.Response(status=201, headers=headers)

    # blobs

    async def blob(self, request: web.Request, target: Route, grant: Grant) -> web.StreamResponse:
        digest = check_digest(target.ref)
        repo = self._repo_uid(target.name, grant)
        size = self.registry.blobs.size(digest)
        if size is None or not self.registry.catalog.linked(repo, digest):
            raise RegistryError(
                "BLOB_UNKNOWN", f"{target.name.full} has no blob {digest}", detail={"digest": digest}
            )
        if request.method == "DELETE":
            self.registry.catalog.unlink(repo, digest)
            return web.Response(status=202, headers={"Docker-Content-Digest": digest})
        return self.registry.blobs.response(digest, {"Docker-Content-Digest": digest})

    # uploads

    async def upload(self, request: web.Request, target: Route, grant: Grant) -> web.StreamResponse:
        if request.method == "POST":
            if target.ref:
                raise RegistryError("UNSUPPORTED", "start an upload with POST /v2/<name>/blobs/uploads/")
            return await self._start_upload(request, target, grant)
        repo = self._repo_uid(target.name, grant)
        session = self.registry.session(target.ref, repo)
        if session is None:
            raise RegistryError(
                "BLOB_UPLOAD_UNKNOWN", f"no upload {target.ref[:64]!r} in progress for {target.name.full}"
            )
        if session.busy and request.method != "GET":
            raise RegistryError("BLOB_UPLOAD_INVALID", "another request is writing this upload; wait for it")
        if request.method == "GET":
            return web.Response(status=204, headers=self._progress(target.name, session))
        if request.method == "DELETE":
            self.registry.close_session(session, discard=True)
            return web.Response(status=204)
        await self._receive(request, target.name, session)
        if request.method == "PATCH":
            return web.Response(status=202, headers=self._progress(target.name, session))
        return self._finish(request.query.get("digest"), target.name, session)

    async def _start_upload(self, request: web.Request, target: Route, grant: Grant) -> web.StreamResponse:
        repo = self.registry.ensure_repo(target.name, grant.identity).uid
        mounted = self._mount(request, target.name, grant, repo)
        if mounted is not None:
            return mounted
        session = self.registry.open_session(repo)
        digest = request.query.get("digest")
        if digest is not None:  # monolithic: the whole blob in this one request
            await self._receive(request, target.name, session)
            return self._finish(digest, target.name, session)
        return web.Response(status=202, headers=self._progress(target.name, session))

    def _mount(
        self, request: web.Request, name: ImageName, grant: Grant, repo: str
    ) -> web.StreamResponse | None:
        """A cross-repository mount when the token may pull the source and it holds the blob, else
        None (the client then uploads: the spec's 202 fallback)."""
        digest, source = request.query.get("mount"), request.query.get("from")
        if digest is None:
            return None
        digest = check_digest(digest)
        if source is None or not grant.allows(source, "pull"):
            return None
        try:
            source_name = parse_name(source)
        except RegistryError:
            return None
        source_repo = self.registry.repo(source_name, grant.identity)
        if source_repo is None or not self.registry.catalog.linked(source_repo.uid, digest):
            return None
        if self.registry.blobs.size(digest) is None:
            return None
        self.registry.catalog.link(repo, digest)
        headers = {"Location": _location(name, f"blobs/{digest}"), "Docker-Content-Digest": digest}
        return web.Response(status=201, headers=headers)

    async def _receive(self, request: web.Request, name: ImageName, session: Session) -> None:
        """Append the request body; a ``Content-Range`` must start where the upload stands (else 416)."""
        upload = session.upload
        content_range = request.headers.get("Content-Range")
        expected: int | None = None
        if content_range:
            start, sep, end = content_range.removeprefix("bytes ").removeprefix("bytes=").partition("-")
            if not (sep and start.isdigit() and end.isdigit()) or int(end) < int(start):
                raise RegistryError(
                    "BLOB_UPLOAD_INVALID", f"Content-Range {content_range[:60]!r} is not <start>-<end>"
                )
            if int(start) != upload.size:
                raise RegistryError(
                    "BLOB_UPLOAD_INVALID",
                    f"the chunk starts at {start}, but the upload holds {upload.size} bytes",
                    status=416,
                    headers=self._progress(name, session),
                )
            expected = int(end) - int(start) + 1
        before = upload.size
        session.busy = True
        try:
            async for chunk in request.content.iter_chunked(CHUNK):
                upload.write(chunk)
        except RegistryError:
            self.registry.close_session(session, discard=True)
            raise
        finally:
            session.busy = False
        received = upload.size - before
        if expected is not None and received != expected:
            self.registry.close_session(session, discard=True)
            raise RegistryError(
                "SIZE_INVALID", f"Content-Range announced {expected} bytes, the body held {received}"
            )

    def _finish(self, digest: str | None, name: ImageName, session: Session) -> web.StreamResponse:
        if not digest:
            raise RegistryError("DIGEST_INVALID", "finish an upload with PUT ...?digest=sha256:<hex>")
        digest = check_digest(digest)
        self.registry.close_session(session, discard=False)
        self.registry.blobs.commit(session.upload, digest)
        self.registry.catalog.link(session.repo, digest)
        headers = {"Location": _location(name, f"blobs/{digest}"), "Docker-Content-Digest": digest}
        return web.Response(status=201, headers=headers)

    def _progress(self, name: ImageName, session: Session) -> dict[str, str]:
        return {
            "Location": _location(name, f"blobs/uploads/{session.upload.session}"),
            "Range": f"0-{max(session.upload.size - 1, 0)}",
            "Docker-Upload-UUID": session.upload.session,
        }
