"""The clients' side: which hosts the credential helpers serve (``TOKENRELAY_HOSTS``), whether the
sidecar keeps a token for each host's audience, and how docker, podman, git and pip reach them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from ..errors import HostsError
from ..helpers.hosts import Host, load
from ..lite.names import HOSTS_ENV
from . import gitconfig, pipkeyring, registries
from .report import Check, failed, passed, skipped


def hosts(environ: Mapping[str, str]) -> tuple[list[Check], tuple[Host, ...]]:
    try:
        found = load(environ)
    except HostsError as exc:
        return [failed("clients.hosts", str(exc), f"correct {HOSTS_ENV} as the message says")], ()
    if not found:
        return [
            skipped(
                "clients.hosts",
                f"{HOSTS_ENV} is not set: the credential helpers answer for no host",
                f"export {HOSTS_ENV}=registry.example.com,git.example.com (host[:port][=audience])",
            )
        ], ()
    listed = ", ".join(f"{h.netloc}={h.audience}" for h in found)
    return [passed("clients.hosts", f"{HOSTS_ENV}: {listed}")], found


def audiences(found: tuple[Host, ...], kept: tuple[str, ...] | None, source: str) -> list[Check]:
    """Each host's audience against the audiences the sidecar keeps (``source`` says who told us)."""
    if not found:
        return []
    if kept is None:
        return [skipped("clients.audiences", "no sidecar or settings to compare TOKENRELAY_HOSTS with")]
    missing = [h for h in found if h.audience not in kept]
    if not missing:
        return [passed("clients.audiences", f"every host's audience is kept by {source}")]
    host = missing[0]
    return [
        failed(
            "clients.audiences",
            f"{HOSTS_ENV} gives {host.netloc} the audience {host.audience}, which {source} does not keep "
            f"(it keeps: {', '.join(kept)})",
            f"add --audience {host.audience} (env TOKENRELAY_AUDIENCE) to `tokenrelay run`, or write "
            f"{host.netloc}=<one of those audiences> in {HOSTS_ENV}",
            missing=[h.audience for h in missing],
        )
    ]


async def helpers(found: tuple[Host, ...], environ: Mapping[str, str]) -> list[Check]:
    """docker, podman/skopeo/buildah and git for each host; pip and uv's keyring once."""
    checks: list[Check] = []
    if found:  # with no host, no helper answers anything: nothing to check
        entries = await asyncio.to_thread(gitconfig.entries, environ)
        for host in found:
            checks.append(registries.docker(host, environ))
            checks.append(registries.containers(host, environ))
            if isinstance(entries, str):
                checks.append(skipped(f"clients.git.{host.netloc}", entries))
            else:
                checks.append(gitconfig.check(host, entries, environ))
        checks.append(await asyncio.to_thread(pipkeyring.in_process))
        checks.append(await asyncio.to_thread(pipkeyring.on_path, environ))
    return checks
