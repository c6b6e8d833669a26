"""The upstream API's HTTP face: every operation of the document, v2beta1 and v1, from one route table.

Each resource kind's HTTP face is described once (``Kind``: its record class, whose names give the
path, the list key and the permissions; its rendering and rules); its List, Get, Create, Update and
Delete handlers are made from that description, so every kind authenticates, checks its query, looks
up, checks access and refuses in the same way and order: the bearer (16), the query parameters (3),
the target (5), the caller's role bindings (7), then the body (3) and the resource's rules. Lists
show only what the caller may read, filtered, then paginated.

The route table is ``KINDS`` plus a few special routes (``add_routes``); a new kind is its record in
``iam.kinds.RECORDS`` and one more ``Kind`` (``tests/emulator/test_kinds.py`` checks both). Reserved for
the registry's tags: ``/registry/v2beta1/tags[/<uid>]`` (tag uid = ``<repo uid>/<tag name>``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from . import pagination
from .errors import (
    IAM_DOMAIN,
    REGISTRY_DOMAIN,
    VULNERABILITIES_DOMAIN,
    invalid_argument,
    not_found,
    unauthenticated,
)
from .iam import (
    access,
    account_associations,
    group_invites,
    groups,
    identities,
    identity_providers,
    role_bindings,
    roles,
)
from .iam.access import ROLES
from .iam.kinds import (
    AccountAssociation,
    Advisory,
    Group,
    GroupInvite,
    Identity,
    IdentityProvider,
    Repo,
    Role,
    RoleBinding,
)
from .iam.resources import Resources, org_of
from .inputs import check_query, json_body
from .model import Record, parent_of
from .pagetoken import PageTokens
from .sts.exchange import TokenService

COMMON = frozenset({"uid", "create_ms"})
NAMED = COMMON | {"name", "update_ms"}
HIERARCHY = ("uidp.descendants_of", "uidp.children_of")
MASK = frozenset({"updateMask", "update_mask"})


@dataclass(frozen=True, slots=True)
class Context:
    resources: Resources
    tokens: TokenService
    audiences: Callable[[], frozenset[str]]  # the API token audiences this API accepts
    wall: Callable[[], float]
    page_tokens: PageTokens


CONTEXT = web.AppKey("api_context", Context)


def respond(payload: Mapping[str, Any], status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(payload).encode(), content_type="application/json")


def empty() -> web.Response:
    return web.Response(status=200)


def caller(request: web.Request, domain: str = IAM_DOMAIN) -> str:
    """The identity uid behind the request's API token; UNAUTHENTICATED without a live one."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthenticated("Unauthenticated: send an API token as Authorization: Bearer <token>", domain)
    ctx = request.app[CONTEXT]
    return ctx.tokens.verify(token.strip(), ctx.audiences())


def in_hierarchy(uid: str, descendants_of: str, children_of: str) -> bool:
    if descendants_of and not uid.startswith(descendants_of + "/"):
        return False
    return not (children_of and parent_of(uid) != children_of)


Creator = Callable[[Resources, str, str, dict[str, Any]], Mapping[str, Any]]  # (res, who, parent, body)
Updater = Callable[[Resources, str, dict[str, Any], str | None], Any]  # (res, uid, body, mask) -> record


@dataclass(frozen=True)
class Kind:
    """One resource kind of the API and everything its handlers need to know about it."""

    record: type[Record]  # its PLURAL is the path segment and list key, its table() the permissions'
    prefix: str  # "/iam/v2beta1"
    domain: str
    render: Callable[[Resources, Any], Mapping[str, Any]]
    order: frozenset[str]
    table: Callable[[Resources], Iterable[Any]] | None = None  # None: the store's table of ``record``
    lookup: Callable[[Resources, str], Any | None] | None = None  # None: a look-up in that table
    scope: Callable[[Any], str | None] = lambda record: parent_of(record.uid)  # None: any caller
    filters: Mapping[str, str] = field(default_factory=dict)  # exact query filter -> attribute
    create: Creator | None = None
    update: Updater | None = None
    delete: Callable[[Resources, str], None] | None = None

    @property
    def plural(self) -> str:
        return self.record.PLURAL

    @property
    def permission(self) -> str:
        return self.record.table()  # "role_bindings": role_bindings.list, role_bindings.get, ...

    @property
    def path(self) -> str:
        return f"{self.prefix}/{self.plural}"

    def records(self, resources: Resources) -> Iterable[Any]:
        if self.table is not None:
            return self.table(resources)
        return resources.store.table(self.record).values()

    def find(self, resources: Resources, uid: str) -> Any:
        if self.lookup is not None:
            record = self.lookup(resources, uid)
        else:
            record = resources.store.table(self.record).get(uid)
        if record is None:
            raise not_found(f"Not found: {self.record.label()} {uid}", self.domain)
        return record

    def require(self, request: web.Request, who: str, verb: str, record: Any) -> None:
        scope = self.scope(record)
        if scope is not None:
            store = request.app[CONTEXT].resources.store
            access.require(store, who, f"{self.permission}.{verb}", scope, self.domain)

    # -- the five handlers ------------------------------------------------------------------------

    async def list(self, request: web.Request) -> web.Response:
        who = caller(request, self.domain)
        query = check_query(request, {*pagination.PARAMETERS, *HIERARCHY, *self.filters}, self.domain)
        page_request = pagination.parse(query, self.order, self.domain)
        ctx = request.app[CONTEXT]
        descendants_of, children_of = (query.get(name, "") for name in HIERARCHY)
        exact = {attribute: query[name] for name, attribute in self.filters.items() if name in query}
        scopes = access.scopes(ctx.resources.store, who, f"{self.permission}.list")
        items = []
        for record in self.records(ctx.resources):
            scope = self.scope(record)
            if (
                in_hierarchy(record.uid, descendants_of, children_of)
                and all(getattr(record, a) == v for a, v in exact.items())
                and (scope is None or access.allowed(scopes, scope))
            ):
                items.append(record)
        query_id = json.dumps([self.path, descendants_of, children_of, sorted(exact.items())])
        page = pagination.paginate(
            items, page_request, query_id=query_id, now=ctx.wall(), tokens=ctx.page_tokens
        )
        return respond(page.envelope(self.plural, lambda r: self.render(ctx.resources, r)))

    async def get(self, request: web.Request) -> web.Response:
        who = caller(request, self.domain)
        check_query(request, (), self.domain)
        resources = request.app[CONTEXT].resources
        record = self.find(resources, request.match_info["uid"])
        self.require(request, who, "get", record)
        return respond(self.render(resources, record))

    async def post(self, request: web.Request) -> web.Response:
        assert self.create is not None
        who = caller(request, self.domain)
        check_query(request, (), self.domain)
        resources = request.app[CONTEXT].resources
        parent = GROUPS.find(resources, request.match_info["uid"])
        access.require(resources.store, who, f"{self.permission}.create", parent.uid, self.domain)
        body = await json_body(request, self.domain)
        return respond(self.create(resources, who, parent.uid, body))

    async def patch(self, request: web.Request) -> web.Response:
        assert self.update is not None
        who = caller(request, self.domain)
        query = check_query(request, MASK, self.domain)
        resources = request.app[CONTEXT].resources
        record = self.find(resources, request.match_info["uid"])
        self.require(request, who, "update", record)
        body = await json_body(request, self.domain)
        if len(MASK & query.keys()) > 1:
            raise invalid_argument("update_mask", "give updateMask or update_mask, not both", self.domain)
        mask = query.get("updateMask", query.get("update_mask"))
        return respond(self.render(resources, self.update(resources, record.uid, body, mask)))

    async def remove(self, request: web.Request) -> web.Response:
        assert self.delete is not None
        who = caller(request, self.domain)
        check_query(request, (), self.domain)
        resources = request.app[CONTEXT].resources
        record = self.find(resources, request.match_info["uid"])
        self.require(request, who, "delete", record)
        self.delete(resources, record.uid)
        return empty()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        one = self.path + "/{uid:.+}"  # uids are slash paths
        router.add_get(self.path, self.list)
        router.add_get(one, self.get)
        if self.create is not None:
            router.add_post(one, self.post)
        if self.update is not None:
            router.add_patch(one, self.patch)
        if self.delete is not None:
            router.add_delete(one, self.remove)


# -- the kinds --------------------------------------------------------------------------------------


def _v2(resources: Resources, record: Any) -> Mapping[str, Any]:
    rendered: Mapping[str, Any] = record.v2()
    return rendered


def _create_binding(
    resources: Resources, who: str, group_uid: str, body: dict[str, Any]
) -> Mapping[str, Any]:
    identity_uid = body.get("identityUid")
    # Binding shows the identity's claims to whoever reads the binding: the caller must be able to read
    # them already (identities of other organizations join through invites, not bindings).
    if (
        isinstance(identity_uid, str)
        and identity_uid in resources.store.identities
        and org_of(identity_uid) == org_of(group_uid)
    ):
        access.require(resources.store, who, "identities.get", parent_of(identity_uid))
    return role_bindings.render(resources, role_bindings.create(resources, group_uid, body))


def _create_invite(resources: Resources, who: str, group_uid: str, body: dict[str, Any]) -> Mapping[str, Any]:
    invite, code = group_invites.create(resources, group_uid, body)
    return {**group_invites.render(resources, invite), "code": code}


def _all_roles(resources: Resources) -> Iterable[Any]:
    return [*ROLES.values(), *resources.store.roles.values()]


GROUPS = Kind(
    Group, "/iam/v2beta1", IAM_DOMAIN, _v2, NAMED,
    scope=lambda group: group.uid,
    filters={"name": "name"},
    create=lambda res, who, parent, body: groups.create(res, parent, body).v2(),
    update=groups.patch,
    delete=groups.delete,
)  # fmt: skip
IDENTITIES = Kind(
    Identity, "/iam/v2beta1", IAM_DOMAIN, _v2, NAMED,
    create=lambda res, who, parent, body: identities.create(res, parent, body).v2(),
    update=identities.patch,
    delete=identities.delete,
)  # fmt: skip
ROLE_KIND = Kind(
    Role, "/iam/v2beta1", IAM_DOMAIN, _v2, NAMED,
    table=_all_roles,
    lookup=lambda res, uid: access.role(res.store, uid),
    scope=lambda role: None if role.builtin else parent_of(role.uid),  # built-ins: every caller
    filters={"name": "name"},
    create=lambda res, who, parent, body: roles.create(res, parent, body).v2(),
    update=roles.patch,
    delete=roles.delete,
)  # fmt: skip
ROLE_BINDINGS = Kind(
    RoleBinding, "/iam/v2beta1", IAM_DOMAIN, role_bindings.render, COMMON,
    filters={"identityUid": "identity", "roleUid": "role"},
    create=_create_binding,
    update=role_bindings.patch,
    delete=role_bindings.delete,
)  # fmt: skip
IDENTITY_PROVIDERS = Kind(
    IdentityProvider, "/iam/v2beta1", IAM_DOMAIN, _v2, NAMED,
    create=lambda res, who, parent, body: identity_providers.create(res, parent, body).v2(),
    update=identity_providers.patch,
    delete=identity_providers.delete,
)  # fmt: skip
ACCOUNT_ASSOCIATIONS = Kind(
    AccountAssociation, "/iam/v2beta1", IAM_DOMAIN, _v2, NAMED,
    create=lambda res, who, parent, body: account_associations.create(res, parent, body).v2(),
    update=account_associations.patch,
    delete=account_associations.delete,
)  # fmt: skip
GROUP_INVITES = Kind(
    GroupInvite, "/iam/v2beta1", IAM_DOMAIN, group_invites.render, COMMON | {"update_ms"},
    create=_create_invite,
    update=group_invites.patch,
    delete=group_invites.delete,
)  # fmt: skip
REPOS = Kind(
    Repo, "/registry/v2beta1", REGISTRY_DOMAIN, _v2, COMMON | {"name"},
    filters={"name": "name"},
)  # fmt: skip
ADVISORIES = Kind(
    Advisory, "/vulnerabilities/v2beta1", VULNERABILITIES_DOMAIN, _v2, COMMON | {"update_ms"},
    scope=lambda advisory: parent_of(parent_of(advisory.uid)),  # the group holding its repo
    filters={"vulnerabilityId": "vulnerability_id"},
)  # fmt: skip

KINDS: tuple[Kind, ...] = (
    GROUPS,
    IDENTITIES,
    ROLE_KIND,
    ROLE_BINDINGS,
    IDENTITY_PROVIDERS,
    ACCOUNT_ASSOCIATIONS,
    GROUP_INVITES,
    REPOS,
    ADVISORIES,
)


async def accept_invite(request: web.Request) -> web.Response:
    """``POST /iam/v2beta1/groupInvites/<uid>:accept`` {"code"}: the caller joins; the code is the right."""
    who = caller(request)
    check_query(request, (), IAM_DOMAIN)
    resources = request.app[CONTEXT].resources
    invite = GROUP_INVITES.find(resources, request.match_info["uid"])
    body = await json_body(request, IAM_DOMAIN)
    return respond(role_bindings.render(resources, group_invites.accept(resources, invite.uid, body, who)))


# -- v1 ---------------------------------------------------------------------------------------------


async def list_groups_v1(request: web.Request) -> web.Response:
    """v1: every readable group in one ``items`` array; ``id`` filters to one group."""
    who = caller(request)
    wanted = check_query(request, ("id",), IAM_DOMAIN).get("id")
    store = request.app[CONTEXT].resources.store
    scopes = access.scopes(store, who, "groups.list")
    groups: list[Group] = sorted(
        (g for g in store.groups.values() if wanted in (None, g.uid) and access.allowed(scopes, g.uid)),
        key=lambda g: g.uid,
    )
    return respond({"items": [g.v1() for g in groups]})


async def list_repos_v1(request: web.Request) -> web.Response:
    who = caller(request, REGISTRY_DOMAIN)
    wanted = check_query(request, ("id",), REGISTRY_DOMAIN).get("id")
    store = request.app[CONTEXT].resources.store
    scopes = access.scopes(store, who, "repos.list")
    repos: list[Repo] = sorted(
        (
            r
            for r in store.repos.values()
            if wanted in (None, r.uid) and access.allowed(scopes, parent_of(r.uid))
        ),
        key=lambda r: r.uid,
    )
    return respond({"items": [r.v1() for r in repos]})


def add_routes(app: web.Application) -> None:
    router = app.router
    # before the kinds: ".../groupInvites/<uid>" would take the ":accept" suffix into the uid
    router.add_post(GROUP_INVITES.path + "/{uid:.+}:accept", accept_invite)
    for kind in KINDS:
        kind.add_routes(router)
    router.add_get("/iam/v1/groups", list_groups_v1)
    router.add_get("/registry/v1/repos", list_repos_v1)


__all__ = ["CONTEXT", "KINDS", "Advisory", "Context", "Identity", "Kind", "RoleBinding", "add_routes"]
