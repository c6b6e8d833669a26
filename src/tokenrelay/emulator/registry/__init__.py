"""A real OCI registry behind the emulator's Registry domain.

``service`` composes it (names, rights, upload sessions); ``distribution`` is its ``/v2/`` HTTP face
and token endpoint, ``tagsapi`` the ``/registry/v2beta1/tags`` resource; ``blobs`` keeps content by
digest, ``catalog`` what each repository holds, ``regtoken`` the registry tokens, ``manifests`` which
manifests are accepted, ``names`` the grammar, ``image`` builds a small image in-process.
"""

from __future__ import annotations

from aiohttp import web

from .distribution import Distribution
from .image import Image, tiny_image
from .service import Registry
from .tagsapi import TagsApi

__all__ = ["Image", "Registry", "add_routes", "tiny_image"]


def add_routes(app: web.Application, registry: Registry) -> None:
    Distribution(registry).add_routes(app)
    TagsApi(registry.catalog).add_routes(app)
