"""The distribution spec's grammar: repository names, tags, digests and the ``/v2/`` paths built of them.

An image's name is ``<organization name>/<repo name>``, as on the real registry; the repo name may have
further ``/``-separated components (``acme/team/app``). Only ``sha256`` digests are accepted: it is
what every client computes, and one algorithm keeps the content store simple.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import RegistryError

MAX_NAME = 255  # distribution's limit on a whole repository name
COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
NAME = re.compile(rf"{COMPONENT}(?:/{COMPONENT})*")
TAG = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")
DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
ANY_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")

# Right-anchored, tried in order: a name may itself contain "blobs" or "manifests" components.
_ROUTES = (
    ("tags", re.compile(r"/v2/(?P<name>.+)/tags/list")),
    ("manifest", re.compile(r"/v2/(?P<name>.+)/manifests/(?P<ref>[^/]+)")),
    ("upload", re.compile(r"/v2/(?P<name>.+)/blobs/uploads(?:/(?P<ref>[^/]*))?")),
    ("blob", re.compile(r"/v2/(?P<name>.+)/blobs/(?P<ref>[^/]+)")),
)


@dataclass(frozen=True, slots=True)
class ImageName:
    """``org/repo``: the organization's name and the repo's name within it."""

    org: str
    repo: str

    @property
    def full(self) -> str:
        return f"{self.org}/{self.repo}"


@dataclass(frozen=True, slots=True)
class Route:
    kind: str  # tags, manifest, upload, blob
    name: ImageName
    ref: str  # tag or digest (manifest), digest (blob), session id (upload, "" to start one)


def parse_name(text: str) -> ImageName:
    """NAME_INVALID unless ``text`` is a valid ``org/repo[/more]`` name."""
    if len(text) > MAX_NAME or NAME.fullmatch(text) is None:
        raise RegistryError(
            "NAME_INVALID",
            f"{text[:MAX_NAME]!r}: lowercase letters, digits and separators (. _ __ -), "
            f"components joined by '/', at most {MAX_NAME} characters",
        )
    org, sep, repo = text.partition("/")
    if not sep:
        raise RegistryError("NAME_INVALID", f"{text!r}: an image is named <organization name>/<repo name>")
    return ImageName(org, repo)


def check_digest(text: str) -> str:
    """The digest, or DIGEST_INVALID naming what is wrong with it."""
    if DIGEST.fullmatch(text) is not None:
        return text
    if ANY_DIGEST.fullmatch(text) is not None and not text.startswith("sha256:"):
        raise RegistryError("DIGEST_INVALID", f"{text[:80]!r}: only sha256 digests are supported")
    raise RegistryError("DIGEST_INVALID", f"{text[:80]!r} is not sha256:<64 lowercase hex digits>")


def is_digest(reference: str) -> bool:
    return ":" in reference


def check_tag(text: str) -> str:
    if TAG.fullmatch(text) is None:
        raise RegistryError("TAG_INVALID", f"{text[:130]!r}: a tag is [a-zA-Z0-9_][a-zA-Z0-9._-]{{0,127}}")
    return text


def route(path: str) -> Route | None:
    """What a ``/v2/...`` path addresses, or None for a path the spec does not define."""
    for kind, pattern in _ROUTES:
        found = pattern.fullmatch(path)
        if found is not None:
            return Route(kind, parse_name(found["name"]), found.groupdict().get("ref") or "")
    return None
