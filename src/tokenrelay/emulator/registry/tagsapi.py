"""The Tags resource of the Registry domain: ``GET /registry/v2beta1/tags`` (List), ``.../tags/<uid>`` (Get).

Same rules as the repos beside them: the hierarchy filters, pagination and ordering of every List, and
access checked on the group holding the tag's repo (``tags.list`` / ``tags.get``, viewer or better).
"""

from __future__ import annotations

from aiohttp import web

from .. import api
from ..errors import REGISTRY_DOMAIN
from ..model import parent_of
from .catalog import Catalog, Tag


def tags_kind(catalog: Catalog) -> api.Kind:
    """Tags as one more kind of the API: its List and Get get pagination, filters, access and errors."""
    return api.Kind(
        Tag,
        "/registry/v2beta1",
        REGISTRY_DOMAIN,
        render=lambda _resources, tag: tag.v2(),
        order=api.NAMED,
        table=lambda _resources: catalog.tags.values(),
        lookup=lambda _resources, uid: catalog.tags.get(uid),
        scope=lambda tag: parent_of(tag.repo),
        filters={"name": "name"},
    )


class TagsApi:
    def __init__(self, catalog: Catalog) -> None:
        self.kind = tags_kind(catalog)

    def add_routes(self, app: web.Application) -> None:
        self.kind.add_routes(app.router)
