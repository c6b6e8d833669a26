"""Which manifests the registry takes: OCI image manifests and indexes, Docker schema 2 manifests and
manifest lists; each checked against what the repository holds before it is stored.

Everything a manifest references must already be in the repository with the size the descriptor
states: blobs for an image manifest, manifests for an index. Layers marked non-distributable (with
``urls``) are the one exception, as in the spec. Docker schema 1 is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .errors import RegistryError
from .names import DIGEST

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
IMAGE_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
MEDIA_TYPES = IMAGE_TYPES | INDEX_TYPES
_NON_DISTRIBUTABLE = (
    "application/vnd.oci.image.layer.nondistributable.",
    "application/vnd.docker.image.rootfs.foreign.",
)

Sizer = Callable[[str], int | None]  # digest -> size held in the repository, or None


def _invalid(why: str) -> RegistryError:
    return RegistryError("MANIFEST_INVALID", why)


def _descriptor(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{where} must be a descriptor object")
    media_type, digest, size = value.get("mediaType"), value.get("digest"), value.get("size")
    if not isinstance(media_type, str) or not media_type:
        raise _invalid(f"{where}.mediaType is required")
    if not isinstance(digest, str) or DIGEST.fullmatch(digest) is None:
        raise _invalid(f"{where}.digest must be sha256:<64 hex digits>")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _invalid(f"{where}.size must be a non-negative integer")
    return value


def _require(descriptor: dict[str, Any], where: str, held: Sizer, what: str) -> None:
    size = held(descriptor["digest"])
    if size is None:
        raise RegistryError(
            "MANIFEST_BLOB_UNKNOWN",
            f"{where} names {what} {descriptor['digest']}, which this repository does not hold; "
            "push it first",
            detail={"digest": descriptor["digest"]},
        )
    if size != descriptor["size"]:
        raise _invalid(f"{where}.size is {descriptor['size']}, but {descriptor['digest']} holds {size} bytes")


def media_type_of(content_type: str | None) -> str:
    return (content_type or "").partition(";")[0].strip().lower()


def validate(body: bytes, content_type: str | None, blob_size: Sizer, manifest_size: Sizer) -> str:
    """The manifest's media type once it checks out; raises RegistryError."""
    media_type = media_type_of(content_type)
    if media_type not in MEDIA_TYPES:
        raise _invalid(
            f"Content-Type {media_type or '(none)'!r} is not a manifest type; "
            f"send one of {', '.join(sorted(MEDIA_TYPES))}"
        )
    try:
        manifest = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _invalid("the body is not JSON") from None
    if not isinstance(manifest, dict):
        raise _invalid("the body must be a JSON object")
    if manifest.get("schemaVersion") != 2:
        raise _invalid("schemaVersion must be 2 (Docker schema 1 is not supported)")
    stated = manifest.get("mediaType")
    if stated is not None and stated != media_type:
        raise _invalid(f"mediaType {stated!r} differs from the Content-Type {media_type!r}")
    if media_type in IMAGE_TYPES:
        _require(_descriptor(manifest.get("config"), "config"), "config", blob_size, "blob")
        layers = manifest.get("layers")
        if not isinstance(layers, list):
            raise _invalid("layers must be a list of descriptors")
        for index, layer in enumerate(layers):
            where = f"layers[{index}]"
            descriptor = _descriptor(layer, where)
            if descriptor["mediaType"].startswith(_NON_DISTRIBUTABLE) and descriptor.get("urls"):
                continue
            _require(descriptor, where, blob_size, "blob")
    else:
        children = manifest.get("manifests")
        if not isinstance(children, list):
            raise _invalid("manifests must be a list of descriptors")
        for index, child in enumerate(children):
            where = f"manifests[{index}]"
            _require(_descriptor(child, where), where, manifest_size, "manifest")
    return media_type
