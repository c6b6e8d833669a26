"""The Tags resource of the Registry domain: ``GET /registry/v2beta1/tags`` (List), ``.../tags/<uid>`` (Get).

Same rules as the repos beside them: the hierarchy filters, pagination and ordering of every List, and
access checked on the group holding the tag's repo (``tags.list`` / ``tags.get``, viewer or better).
"""

from __future__ import annotations

from aiohttp import web

from .. import access, api
from ..errors import REGISTRY_DOMAIN, not_found
from ..model import parent_of
from .catalog import Catalog, Tag

TAG_ORDER = api.COMMON | {"name", "update_ms"}


class TagsApi:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/registry/v2beta1/tags", self.list)
        app.router.add_get("/registry/v2beta1/tags/{uid:.+}", self.get)

    async def list(self, request: web.Request) -> web.Response:
        who = api.caller(request)
        store = request.app[api.CONTEXT].resources.store
        descendants_of, children_of = api.hierarchy(request)
        scopes = access.scopes(store, who, "tags.list")
        tags = [
            tag
            for tag in self.catalog.tags.values()
            if api.in_hierarchy(tag.uid, descendants_of, children_of)
            and access.allowed(scopes, parent_of(tag.repo))
        ]
        return api.listing(request, "tags", tags, TAG_ORDER, [descendants_of, children_of], Tag.v2)

    async def get(self, request: web.Request) -> web.Response:
        who = api.caller(request)
        store = request.app[api.CONTEXT].resources.store
        tag = self.catalog.tags.get(request.match_info["uid"])
        if tag is None:
            raise not_found(f"Not found: tag {request.match_info['uid']}", REGISTRY_DOMAIN)
        access.require(store, who, "tags.get", parent_of(tag.repo))
        return api.respond(tag.v2())
