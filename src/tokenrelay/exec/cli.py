"""``tokenrelay exec [run's flags] -- CMD [ARGS...]``: the command line, and the exit statuses.

Everything before the first ``--`` is ours (run's options, then exec's own), everything after it is
the command's, flags included. Exit status: the command's (128+N when signal N killed it); 125 when
tokenrelay itself fails (a bad flag, no token) and the command never ran; 127 when the command is
not found and 126 when it cannot be run, as env(1) has it. Whatever happens, the private directory
goes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace
from types import FrameType
from typing import NoReturn

from ..errors import ConfigError, TokenRelayError
from ..helpers import hosts as host_list
from ..lite.names import where
from ..options import add_options, read_options
from ..serving.socketdir import private_directory
from ..sidecar import settings as runsettings
from . import targets
from .forwarding import FORWARDED
from .options import EXEC_OPTIONS
from .workspace import Workspace

PROG = "tokenrelay exec"
RELAY_FAILED = 125  # as env(1) and timeout(1) for their own failures
USAGE = "tokenrelay exec [run's flags] -- CMD [ARGS...]"


class Parser(argparse.ArgumentParser):
    """Splits the command off at the first ``--``; a usage error is exit status 125, not argparse's 2."""

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        words = list(sys.argv[1:] if args is None else args)
        ours, dashes, command = _split(words)
        if dashes:
            parsed = super().parse_args(ours, namespace)
        else:
            parsed, extra = super().parse_known_args(ours, namespace)
            if any(word.startswith("-") for word in extra):
                self.error(f"unrecognized arguments: {' '.join(extra)}")
        if not command:
            self.error(f"give the command after --: {USAGE}")
        parsed.command = command
        return parsed

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(RELAY_FAILED, f"{self.prog}: {message}\n")


def _split(words: list[str]) -> tuple[list[str], bool, list[str]]:
    if "--" not in words:
        return words, False, []
    at = words.index("--")
    return words[:at], True, words[at + 1 :]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = USAGE
    parser.description = (
        "Run CMD with a tokenrelay sidecar of its own, in this process, for as long as CMD lives: "
        "a private socket (TOKENRELAY_SOCKET), the proxy's URL (TOKENRELAY_PROXY_URL) with "
        "--proxy-listen, tokens kept fresh. Every option of `tokenrelay run` applies."
    )
    runsettings.add_arguments(parser)
    add_options(parser.add_argument_group("exec"), EXEC_OPTIONS)


def run(args: argparse.Namespace) -> int:
    try:
        settings, chosen, hosts, export_token = _read(args)
    except TokenRelayError as exc:
        return _failed(exc)
    environ = dict(os.environ)  # before the daemon's imports set anything of ours in it
    for signum in FORWARDED:  # until session's handlers take over: unwind, so the directory goes
        signal.signal(signum, _stop)
    try:
        private = private_directory()
    except TokenRelayError as exc:
        return _failed(exc)
    try:
        workspace = Workspace(private, environ, hosts, settings)
        for target in chosen:
            target.apply(workspace)
        settings = replace(workspace.settings, socket=str(workspace.socket))
        return _serve(settings, args.command, workspace, export_token)
    except TokenRelayError as exc:
        return _failed(exc)
    except _Stopped as stopped:
        return 128 + stopped.signum
    finally:
        # exec's last act: a signal now would only cut the removal short, so it waits for the exit
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        shutil.rmtree(private, ignore_errors=True)


class _Stopped(BaseException):
    """A forwarded signal came before the command could be sent it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stopped(signum)


def _read(
    args: argparse.Namespace,
) -> tuple[runsettings.Settings, list[targets.Target], tuple[host_list.Host, ...], str | None]:
    """Run's settings, plus what exec adds: the targets, the hosts (whose audiences join the
    settings'), the variable to export the token in. Raises TokenRelayError."""
    if args.socket is not None:
        raise ConfigError(f"{where('socket')} does not go with exec, which serves a private socket; drop it")
    settings = runsettings.load(args)
    if settings.once:
        raise ConfigError(f"{where('once')} does not go with exec, which serves for as long as CMD lives")
    values = read_options(EXEC_OPTIONS, args)
    hosts = host_list.parse_list(settings.hosts, where("hosts"))  # flag, env or the --config file's key
    chosen = targets.chosen(values["configure"])
    if chosen and not hosts:
        raise ConfigError(f"{where('configure')} needs the hosts to set up: give {where('hosts')}")
    export_token = values["export_token"]
    if export_token is not None and not (export_token.isascii() and export_token.isidentifier()):
        raise ConfigError(
            f"{where('export_token')}: {export_token!r} is not a variable name such as API_TOKEN"
        )
    audiences = tuple(dict.fromkeys((*settings.audience, *(host.audience for host in hosts))))
    return replace(settings, audience=audiences), chosen, hosts, export_token


def _serve(
    settings: runsettings.Settings, command: list[str], workspace: Workspace, export_token: str | None
) -> int:
    import asyncio

    from ..serving import logs
    from ..serving.startup import prepare_daemon
    from ..sidecar.command import daemon_loop_factory

    logs.setup(settings.log_level, settings.log_format)
    prepare_daemon()
    from ..sidecar import daemon
    from . import session

    async def main() -> int:
        sidecar = daemon.build(settings)
        return await session.run(sidecar, command, workspace.env, export_token=export_token)

    try:
        with asyncio.Runner(loop_factory=daemon_loop_factory(settings)) as runner:
            return runner.run(main())
    except session.CommandFailed as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.status


def _failed(exc: TokenRelayError) -> int:
    print(f"{PROG}: {exc}", file=sys.stderr)
    return RELAY_FAILED
