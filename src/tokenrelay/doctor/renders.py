"""Each --render of the settings: the file is there (a regular file, not a link), it holds an entry
for every host of --hosts whose audience the sidecar keeps, and each entry's token is fresh: the
sidecar's current one when it answers, else at least not expired."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import HostsError
from ..helpers.hosts import Host, parse_list
from ..lite.jwtclaims import numeric_claim, unverified_claims
from ..lite.redact import fingerprint
from ..lite.socketclient import LocalApiError, fetch_token
from ..lite.timestamps import format_timestamp
from ..serving.sinks import refuse_symlink
from ..sidecar.settings import Settings
from .report import Check, Outcome, failed, passed, skipped, warning

if TYPE_CHECKING:
    from ..render import Render

# The sidecar's current token for an audience, None when it does not answer.
Current = Callable[[str], "str | None"]


def check(
    settings: Settings, kept: Sequence[str] | None, wall: Callable[[], float] = time.time
) -> list[Check]:
    """One check per --render; ``kept`` are the audiences the running sidecar holds (None: no sidecar)."""
    if not settings.render:
        return []
    from .. import render

    try:
        hosts = parse_list(settings.hosts, "--hosts")
    except HostsError as exc:
        return [failed("renders.hosts", str(exc), "correct --hosts (env TOKENRELAY_HOSTS)")]
    current = _current(settings.socket) if kept is not None else _absent
    formats = render.options(settings)
    return [_one(render.parse(spec, formats), hosts, kept, current, wall) for spec in settings.render]


def _current(socket: str) -> Current:
    cache: dict[str, str | None] = {}

    def get(audience: str) -> str | None:
        if audience not in cache:
            try:
                cache[audience] = fetch_token(socket, audience, timeout=5.0).token
            except LocalApiError:
                cache[audience] = None
        return cache[audience]

    return get


def _absent(audience: str) -> str | None:
    return None


def _one(
    render: Render,
    hosts: tuple[Host, ...],
    kept: Sequence[str] | None,
    current: Current,
    wall: Callable[[], float],
) -> Check:
    path = render.path
    cid = f"renders.{path}"
    rerun = f"run `tokenrelay run` with --render {render.spec}; it writes the file at its first exchange"
    try:
        refuse_symlink(path)
        text = path.read_text()
    except FileNotFoundError:
        if kept is None:
            return skipped(
                cid, f"{path} is not there, and no sidecar runs (a clean stop removes its entries)"
            )
        return failed(cid, f"{path} is not there, though the sidecar runs", rerun)
    except (OSError, UnicodeDecodeError) as exc:
        return failed(cid, f"{path} cannot be read: {exc}", "point --render at a regular text file")
    missing = [h.netloc for h in hosts if kept is not None and h.audience not in kept]
    if missing:
        return failed(
            cid,
            f"{path}: the sidecar keeps no token for the audience of {', '.join(missing)}",
            "add the hosts' audiences with --audience (env TOKENRELAY_AUDIENCE)",
        )
    found = _judge(render, text, hosts, current, wall)
    if found.outcome is Outcome.WARNING:
        # The sidecar may have refreshed between our reading the file and asking it: read once more.
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found = _judge(render, path.read_text(), hosts, current, wall)
    return found


def _judge(
    render: Render, text: str, hosts: tuple[Host, ...], current: Current, wall: Callable[[], float]
) -> Check:
    path, fmt = render.path, render.format
    cid = f"renders.{path}"
    rerun = f"run `tokenrelay run` with --render {render.spec}; it writes the file at its first exchange"
    if not fmt.tokens(text) and fmt.takes_source:
        token = current(hosts[0].audience) if hosts else None
        if token is None:
            return passed(
                cid, f"{path} is there (a template: its token is checked against a running sidecar)"
            )
        if token not in text:
            return failed(cid, f"{path} does not hold the sidecar's current token", rerun)
        return passed(cid, f"{path} holds the current token for {hosts[0].netloc}")
    held = fmt.tokens(text)
    absent = [h.netloc for h in hosts if fmt.key(h) not in held]
    if absent:
        return failed(cid, f"{path} has no tokenrelay entry for {', '.join(absent)}", rerun)
    for host in hosts:
        token = held[fmt.key(host)]
        expiry = numeric_claim(unverified_claims(token) or {}, "exp")
        if expiry is not None and expiry <= wall():
            return failed(
                cid,
                f"{path}: the token for {host.netloc} expired at {format_timestamp(expiry)}",
                "the sidecar no longer refreshes this file: check `tokenrelay status` and its error lines",
            )
        live = current(host.audience)
        if live is not None and live != token:
            return warning(
                cid,
                f"{path}: the token for {host.netloc} ({fingerprint(token)}) is not the sidecar's current "
                f"one ({fingerprint(live)})",
                "run the doctor again; if it stays so, the sidecar's error lines say why it cannot write",
            )
    return passed(cid, f"{path} ({fmt.name}) holds a fresh token for {', '.join(h.netloc for h in hosts)}")
