"""The upstream API's HTTP face: every endpoint of the document, v2beta1 and v1.

Handlers do four things in order: authenticate the bearer (16), check that the target exists (5),
check the caller's role bindings (7), then apply the rule from ``resources``. Lists show only what
the caller may read, filtered, then paginated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from . import access, pagination
from .access import ROLES
from .errors import REGISTRY_DOMAIN, invalid_argument, not_found, unauthenticated
from .model import Group, Identity, Repo, Role, RoleBinding, parent_of
from .resources import Resources
from .sts import TokenService

T = TypeVar("T")

COMMON = frozenset({"uid", "create_ms"})
GROUP_ORDER = COMMON | {"name", "update_ms"}
IDENTITY_ORDER = GROUP_ORDER
ROLE_ORDER = frozenset({"uid", "name"})
BINDING_ORDER = COMMON
REPO_ORDER = COMMON | {"name"}


@dataclass(frozen=True, slots=True)
class Context:
    resources: Resources
    tokens: TokenService
    audiences: Callable[[], frozenset[str]]  # the API token audiences this API accepts
    wall: Callable[[], float]


CONTEXT = web.AppKey("api_context", Context)


def respond(payload: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(payload).encode(), content_type="application/json")


def empty() -> web.Response:
    return web.Response(status=200)


def caller(request: web.Request) -> str:
    """The identity uid behind the request's API token; UNAUTHENTICATED without a live one."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthenticated("Unauthenticated: send an API token as Authorization: Bearer <token>")
    ctx = request.app[CONTEXT]
    return ctx.tokens.verify(token.strip(), ctx.audiences())


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise invalid_argument("body", "not JSON") from None
    if not isinstance(body, dict):
        raise invalid_argument("body", "must be a JSON object")
    return body


def listing(
    request: web.Request,
    key: str,
    items: Iterable[T],
    order_fields: frozenset[str],
    filters: Sequence[str],
    render: Callable[[T], dict[str, Any]],
) -> web.Response:
    ctx = request.app[CONTEXT]
    page_request = pagination.parse(request.query, order_fields)
    query_id = json.dumps([request.path, *filters])
    page = pagination.paginate(list(items), page_request, query_id=query_id, now=ctx.wall())
    return respond(page.envelope(key, render))


def hierarchy(request: web.Request) -> tuple[str, str]:
    return request.query.get("uidp.descendants_of", ""), request.query.get("uidp.children_of", "")


def in_hierarchy(uid: str, descendants_of: str, children_of: str) -> bool:
    if descendants_of and not uid.startswith(descendants_of + "/"):
        return False
    return not (children_of and parent_of(uid) != children_of)


# -- groups ---------------------------------------------------------------------------------------


async def list_groups(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    descendants_of, children_of = hierarchy(request)
    name = request.query.get("name")
    scopes = access.scopes(ctx.resources.store, who, "groups.list")
    groups = [
        g
        for g in ctx.resources.store.groups.values()
        if in_hierarchy(g.uid, descendants_of, children_of)
        and (name is None or g.name == name)
        and access.allowed(scopes, g.uid)
    ]
    return listing(
        request, "groups", groups, GROUP_ORDER, [descendants_of, children_of, name or ""], Group.v2
    )


async def get_group(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    group = ctx.resources.group(request.match_info["uid"])
    access.require(ctx.resources.store, who, "groups.get", group.uid)
    return respond(group.v2())


async def create_group(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    parent = ctx.resources.group(request.match_info["uid"])
    access.require(ctx.resources.store, who, "groups.create", parent.uid)
    group = ctx.resources.create_group(parent.uid, await json_body(request))
    return respond(group.v2())


async def patch_group(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    group = ctx.resources.group(request.match_info["uid"])
    access.require(ctx.resources.store, who, "groups.update", group.uid)
    mask = request.query.get("updateMask", request.query.get("update_mask"))
    updated = ctx.resources.patch_group(group.uid, await json_body(request), mask)
    return respond(updated.v2())


async def delete_group(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    group = ctx.resources.group(request.match_info["uid"])
    access.require(ctx.resources.store, who, "groups.delete", group.uid)
    ctx.resources.delete_group(group.uid)
    return empty()


# -- identities -----------------------------------------------------------------------------------


async def list_identities(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    descendants_of, children_of = hierarchy(request)
    scopes = access.scopes(ctx.resources.store, who, "identities.list")
    identities = [
        i
        for i in ctx.resources.store.identities.values()
        if in_hierarchy(i.uid, descendants_of, children_of) and access.allowed(scopes, parent_of(i.uid))
    ]
    return listing(
        request, "identities", identities, IDENTITY_ORDER, [descendants_of, children_of], Identity.v2
    )


async def get_identity(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    identity = ctx.resources.identity(request.match_info["uid"])
    access.require(ctx.resources.store, who, "identities.get", parent_of(identity.uid))
    return respond(identity.v2())


async def create_identity(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    group = ctx.resources.group(request.match_info["uid"])
    access.require(ctx.resources.store, who, "identities.create", group.uid)
    identity = ctx.resources.create_identity(group.uid, await json_body(request))
    return respond(identity.v2())


async def delete_identity(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    identity = ctx.resources.identity(request.match_info["uid"])
    access.require(ctx.resources.store, who, "identities.delete", parent_of(identity.uid))
    ctx.resources.delete_identity(identity.uid)
    return empty()


# -- roles ----------------------------------------------------------------------------------------


async def list_roles(request: web.Request) -> web.Response:
    caller(request)  # built-in roles are readable by every authenticated caller
    return listing(request, "roles", ROLES.values(), ROLE_ORDER, [], Role.v2)


async def get_role(request: web.Request) -> web.Response:
    caller(request)
    role = ROLES.get(request.match_info["uid"])
    if role is None:
        raise not_found(f"Not found: role {request.match_info['uid']}")
    return respond(role.v2())


# -- role bindings --------------------------------------------------------------------------------


async def list_bindings(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    descendants_of, children_of = hierarchy(request)
    scopes = access.scopes(ctx.resources.store, who, "role_bindings.list")
    bindings = [
        b
        for b in ctx.resources.store.bindings.values()
        if in_hierarchy(b.uid, descendants_of, children_of) and access.allowed(scopes, b.group)
    ]
    render: Callable[[RoleBinding], dict[str, Any]] = ctx.resources.render_binding
    return listing(request, "roleBindings", bindings, BINDING_ORDER, [descendants_of, children_of], render)


async def create_binding(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    group = ctx.resources.group(request.match_info["uid"])
    access.require(ctx.resources.store, who, "role_bindings.create", group.uid)
    binding = ctx.resources.create_binding(group.uid, await json_body(request))
    return respond(ctx.resources.render_binding(binding))


async def delete_binding(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    binding = ctx.resources.binding(request.match_info["uid"])
    access.require(ctx.resources.store, who, "role_bindings.delete", binding.group)
    ctx.resources.delete_binding(binding.uid)
    return empty()


# -- repos ----------------------------------------------------------------------------------------


def _visible_repos(request: web.Request, who: str) -> list[Repo]:
    ctx = request.app[CONTEXT]
    descendants_of, children_of = hierarchy(request)
    scopes = access.scopes(ctx.resources.store, who, "repos.list")
    return [
        r
        for r in ctx.resources.store.repos.values()
        if in_hierarchy(r.uid, descendants_of, children_of) and access.allowed(scopes, parent_of(r.uid))
    ]


async def list_repos(request: web.Request) -> web.Response:
    who = caller(request)
    filters = list(hierarchy(request))
    return listing(request, "repos", _visible_repos(request, who), REPO_ORDER, filters, Repo.v2)


async def get_repo(request: web.Request) -> web.Response:
    who = caller(request)
    ctx = request.app[CONTEXT]
    repo = ctx.resources.store.repos.get(request.match_info["uid"])
    if repo is None:
        raise not_found(f"Not found: repo {request.match_info['uid']}", REGISTRY_DOMAIN)
    access.require(ctx.resources.store, who, "repos.get", parent_of(repo.uid))
    return respond(repo.v2())


# -- v1 -------------------------------------------------------------------------------------------


async def list_groups_v1(request: web.Request) -> web.Response:
    """v1: every readable group in one ``items`` array; ``id`` filters to one group."""
    who = caller(request)
    ctx = request.app[CONTEXT]
    wanted = request.query.get("id")
    scopes = access.scopes(ctx.resources.store, who, "groups.list")
    groups = sorted(
        (
            g
            for g in ctx.resources.store.groups.values()
            if (wanted is None or g.uid == wanted) and access.allowed(scopes, g.uid)
        ),
        key=lambda g: g.uid,
    )
    return respond({"items": [g.v1() for g in groups]})


async def list_repos_v1(request: web.Request) -> web.Response:
    who = caller(request)
    wanted = request.query.get("id")
    repos = sorted(
        (r for r in _visible_repos(request, who) if wanted is None or r.uid == wanted), key=lambda r: r.uid
    )
    return respond({"items": [r.v1() for r in repos]})


def add_routes(app: web.Application) -> None:
    uid = "{uid:.+}"  # uids are slash paths
    r = app.router
    r.add_get("/iam/v2beta1/groups", list_groups)
    r.add_get(f"/iam/v2beta1/groups/{uid}", get_group)
    r.add_post(f"/iam/v2beta1/groups/{uid}", create_group)
    r.add_patch(f"/iam/v2beta1/groups/{uid}", patch_group)
    r.add_delete(f"/iam/v2beta1/groups/{uid}", delete_group)
    r.add_get("/iam/v2beta1/identities", list_identities)
    r.add_get(f"/iam/v2beta1/identities/{uid}", get_identity)
    r.add_post(f"/iam/v2beta1/identities/{uid}", create_identity)
    r.add_delete(f"/iam/v2beta1/identities/{uid}", delete_identity)
    r.add_get("/iam/v2beta1/roles", list_roles)
    r.add_get(f"/iam/v2beta1/roles/{uid}", get_role)
    r.add_get("/iam/v2beta1/roleBindings", list_bindings)
    r.add_post(f"/iam/v2beta1/roleBindings/{uid}", create_binding)
    r.add_delete(f"/iam/v2beta1/roleBindings/{uid}", delete_binding)
    r.add_get("/registry/v2beta1/repos", list_repos)
    r.add_get(f"/registry/v2beta1/repos/{uid}", get_repo)
    r.add_get("/iam/v1/groups", list_groups_v1)
    r.add_get("/registry/v1/repos", list_repos_v1)
