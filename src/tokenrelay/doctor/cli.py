"""The ``tokenrelay doctor`` command: run every group of checks, print them, exit 0 only when
nothing needed failed (1 otherwise; 2 for a usage error)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Mapping
from typing import TypeVar

from .. import outbound
from ..lite import socketclient as client
from ..lite.names import AGENT_TOKEN_FILE_ENV
from ..sidecar import settings as runsettings
from ..sidecar.settings import Settings
from . import agent, clients, gitconfig, oidc, renders, routed, service, settings, sidecar
from .report import Outcome, Report, failed, skipped

T = TypeVar("T")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Check the set-up where you are, with the same flags, TOKENRELAY_* variables and --config "
        "as `tokenrelay run`; prints one line per check and the fix for each failure."
    )
    parser.add_argument("--json", action="store_true", help="print the findings as one JSON document")
    runsettings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(diagnose(args, os.environ))
    sys.stdout.write(report.json() if args.json else report.text())
    return report.exit_status()


async def diagnose(args: argparse.Namespace, environ: Mapping[str, str]) -> Report:
    """Every check, in order; later groups use what earlier ones learnt (the settings, the token)."""
    report = Report()
    if environ.get(AGENT_TOKEN_FILE_ENV):
        # A pod in agent mode: the node agent holds the settings and exchanges; the pod has its token.
        found_agent = await _guarded(report, "agent", agent.check(environ))
        report.add(*(found_agent or []))
        await _guarded(report, "clients", _clients(report, environ, None, None, ""))
        return report
    checks, loaded = settings.check(args, environ)
    report.add(*checks)
    if loaded is None:
        report.add(skipped("oidc.read", "no settings: the OIDC token was not checked"))
        report.add(skipped("service.reach", "no settings: the token service was not checked"))
    else:
        await _guarded(report, "service", _exchange(report, loaded, environ))
    path = loaded.socket if loaded is not None else client.socket_path(None, environ)
    found = await _guarded(report, "sidecar", sidecar.check(path, needed=loaded is None))
    if found is not None:
        report.add(*found.checks)
    await _guarded(report, "clients", _clients(report, environ, found, loaded, path))
    return report


async def _guarded(report: Report, group: str, step: Awaitable[T]) -> T | None:
    """``step``'s result; a bug in it becomes one failed line, never a traceback, and the rest runs."""
    try:
        return await step
    except Exception as exc:
        report.add(
            failed(
                f"{group}.internal",
                f"the {group} checks stopped on an internal error ({type(exc).__name__})",
                "this is a bug in tokenrelay doctor: please report it with the lines above",
            )
        )
        return None


async def _exchange(report: Report, loaded: Settings, environ: Mapping[str, str]) -> None:
    async with outbound.session() as session:
        oidc_checks, token = await oidc.check(loaded, environ, session)
        report.add(*oidc_checks)
        reached = await service.reach(loaded, session, environ)
        report.add(*reached)
        if token is None or token.claims is None:
            report.add(skipped("service.exchange", "no usable OIDC token: no exchange tried"))
        elif any(c.id in ("service.reach", "service.tls") and c.outcome is Outcome.FAILED for c in reached):
            report.add(
                skipped(
                    "service.exchange", "the token service cannot be reached or trusted: no exchange tried"
                )
            )
        else:
            report.add(*await service.exchanges(loaded, session, token, loaded.audiences, environ))


async def _clients(
    report: Report,
    environ: Mapping[str, str],
    found: sidecar.Sidecar | None,
    loaded: Settings | None,
    path: str,
) -> None:
    git = await asyncio.to_thread(gitconfig.entries, environ)
    host_checks, hosts = clients.hosts(environ, await asyncio.to_thread(routed.routes, environ, git))
    report.add(*host_checks)
    if found is not None and found.audiences is not None:
        report.add(*clients.audiences(hosts, found.audiences, f"the sidecar at {path}"))
    elif loaded is not None:
        report.add(*clients.audiences(hosts, loaded.audiences, "these settings"))
    else:
        report.add(*clients.audiences(hosts, None, ""))
    report.add(*await clients.helpers(hosts, environ, git))
    if loaded is not None:
        kept = found.audiences if found is not None else None
        report.add(*await asyncio.to_thread(renders.check, loaded, kept))
