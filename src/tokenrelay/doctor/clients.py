"""The clients' side: which hosts the credential helpers serve (``TOKENRELAY_HOSTS``), whether the
sidecar keeps a token for each host's audience, and how docker, podman, git and pip reach them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from ..errors import HostsError
from ..helpers.hosts import Host, load
from ..lite.names import HOSTS_ENV
from . import gitconfig, pipkeyring, registries, routed
from .report import Check, failed, passed, skipped


def hosts(
    environ: Mapping[str, str], routes: Sequence[routed.Route] = ()
) -> tuple[list[Check], tuple[Host, ...]]:
    """``clients.hosts``: TOKENRELAY_HOSTS readable, and naming every server the clients' own
    configuration (``routes``) sends to tokenrelay's helpers, which refuse any other."""
    try:
        found = load(environ)
    except HostsError as exc:
        return [failed("clients.hosts", str(exc), f"correct {HOSTS_ENV} as the message says")], ()
    left_out = routed.refused(found, routes)
    if left_out:
        return [_left_out(found, left_out)], found
    if not found:
        return [
            skipped(
                "clients.hosts",
                f"{HOSTS_ENV} is not set: the credential helpers answer for no host",
                f"export {HOSTS_ENV}=registry.example.com,git.example.com (host[:port][=audience])",
            )
        ], found
    listed = ", ".join(f"{h.netloc}={h.audience}" for h in found)
    return [passed("clients.hosts", f"{HOSTS_ENV}: {listed}")], found


def _left_out(found: tuple[Host, ...], left_out: list[routed.Route]) -> Check:
    first = left_out[0]
    state = "does not list it" if found else "is not set"
    if first.server == routed.EVERY:
        text = f"{first.where} sends every registry to tokenrelay, but {HOSTS_ENV} {state}"
        add = "the registries"
    else:
        more = f" (and {len(left_out) - 1} more)" if len(left_out) > 1 else ""
        text = f"{first.where} sends {first.server} to tokenrelay{more}, but {HOSTS_ENV} {state}"
        add = ",".join(dict.fromkeys(r.netloc for r in left_out if r.server != routed.EVERY))
    listed = ",".join([*(h.netloc for h in found), add])
    return failed(
        "clients.hosts",
        f"{text}: tokenrelay's helper will refuse it, and the client goes on without credentials",
        f"add {add} to {HOSTS_ENV} (export {HOSTS_ENV}={listed}), or to --hosts of `tokenrelay exec`",
        refused=[r.server or "*" for r in left_out],
    )


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


async def helpers(
    found: tuple[Host, ...], environ: Mapping[str, str], entries: list[gitconfig.Entry] | str
) -> list[Check]:
    """docker, podman/skopeo/buildah and git (``entries``, gitconfig's) for each host; pip and uv's
    keyring once."""
    checks: list[Check] = []
    if found:  # with no host, no helper answers anything: nothing to check
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
