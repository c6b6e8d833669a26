"""Which servers the clients' own configuration sends to tokenrelay's helpers: each must be in
``TOKENRELAY_HOSTS``, or the helper answers "not found" and the client goes on without credentials
(a registry's 401, git's password prompt).

Read here: docker's ``config.json`` (``credHelpers`` naming tokenrelay, and with a ``credsStore`` of
tokenrelay the registries its ``auths`` lists, or every registry), the auth files of podman, skopeo
and buildah (``credHelpers``; they never read ``credsStore``), and git's ``credential.<url>.helper``
entries for one host. A bare ``credential.helper``, a wildcard URL and pip's keyring ask for any
host, so they name none to check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..helpers.hosts import Host, join_netloc, match, parse_server
from . import gitconfig, registries

EVERY = ""  # the server of a route that sends every registry (docker's credsStore)


@dataclass(frozen=True, slots=True)
class Route:
    """One server a client sends to tokenrelay, and the configuration that says so."""

    server: str  # as the client will ask (a credHelpers key, a git URL), or EVERY
    where: str

    @property
    def netloc(self) -> str:
        """What to add to TOKENRELAY_HOSTS for it."""
        target = parse_server(self.server)
        return join_netloc(target.name, target.port) if target is not None else self.server


def routes(environ: Mapping[str, str], git: list[gitconfig.Entry] | str) -> list[Route]:
    """Every route in the clients' configuration; ``git`` is gitconfig.entries' answer."""
    found: list[Route] = []
    docker = registries.read(registries.docker_path(environ))
    found.extend(_docker(docker.content or {}, str(docker.path)))
    for path in registries.containers_paths(environ):
        if path == docker.path:
            continue  # read above, credsStore and all
        content = registries.read(path).content or {}
        found.extend(Route(key, f"credHelpers in {path}") for key in _ours(content.get("credHelpers")))
    if not isinstance(git, str):
        for entry in git:
            url = entry.url
            if entry.name == "helper" and url and "*" not in url and gitconfig.kind(entry.value) == "ours":
                found.append(Route(url, f"git's credential.{url}.helper ({entry.origin})"))
    first: dict[str, Route] = {}
    for route in found:
        first.setdefault(route.server, route)
    return list(first.values())


def refused(found: Sequence[Host], routed: Sequence[Route]) -> list[Route]:
    """The routes whose server no host of ``found`` matches: the helper will refuse them."""
    return [r for r in routed if (not found if r.server == EVERY else match(found, r.server) is None)]


def _docker(content: Mapping[str, Any], path: str) -> list[Route]:
    found = [Route(key, f"credHelpers in {path}") for key in _ours(content.get("credHelpers"))]
    if content.get("credsStore") == registries.OURS:
        auths = content.get("auths")
        keys = [str(key) for key in auths] if isinstance(auths, dict) else []
        found.extend(Route(key, f"credsStore in {path}") for key in keys)
        if not keys:
            found.append(Route(EVERY, f"credsStore in {path}"))
    return found


def _ours(helpers: object) -> list[str]:
    if not isinstance(helpers, dict):
        return []
    return [str(key) for key, value in helpers.items() if value == registries.OURS]
