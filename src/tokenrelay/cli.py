"""The ``tokenrelay`` command. Subcommands import what they need when they run, so that
``tokenrelay token`` starts in milliseconds and never loads aiohttp."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: ``tokenrelay go-auth`` is a helper, and pays for every import
if TYPE_CHECKING:
    import argparse
    import asyncio
    from collections.abc import Callable, Coroutine, Sequence

    from .sidecar.settings import Settings


# Subcommands that live in their own modules: ``add_arguments(parser)`` and ``run(args) -> int``.
# Imported only when named, so that ``tokenrelay token`` never pays for the emulator.
PLUGINS: dict[str, tuple[str, str]] = {
    "emulate": (
        "tokenrelay.emulator.cli",
        "run the embedded emulator of the upstream (issuer, token service, API)",
    ),
    "dev": (
        "tokenrelay.emulator.dev",
        "run the emulator, a sidecar wired to it and the proxy: the whole thing locally",
    ),
    "doctor": (
        "tokenrelay.doctor.cli",
        "check the set-up where you are (settings, OIDC token, token service, sidecar, clients) "
        "and say how to fix what is wrong",
    ),
    "exec": (
        "tokenrelay.wrap.cli",
        "run a command with a relay of its own for as long as it lives (CI steps, cron jobs, scripts)",
    ),
    "status": ("tokenrelay.sidecar.status", "show a running sidecar's tokens, refreshes and failures"),
    "inject": (
        "tokenrelay.kube.inject",
        "add the tokenrelay sidecar to the workloads of a YAML file (the webhook's mutation, offline)",
    ),
    "webhook": (
        "tokenrelay.kube.webhook",
        "serve the mutating admission webhook that injects the tokenrelay sidecar",
    ),
    "agent": (
        "tokenrelay.agent.cli",
        "run the node agent: one relay per node serving every opted-in pod on it (a DaemonSet)",
    ),
    "kubelet-credential-provider": (
        "tokenrelay.helpers.kubelet",
        "kubelet image credential provider (credentialprovider.kubelet.k8s.io/v1)",
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["go-auth"]:  # a credential helper: before argparse and the rest of the CLI
        from .helpers import exit_now
        from .helpers.goauth import main as go_auth

        status = go_auth(words[1:])
        if argv is None:
            exit_now(status)  # a process of its own: skip the interpreter's finalization, as helpers do
        return status
    if words and words[0] in PLUGINS:
        return _run_plugin(words[0], words[1:])
    parser = _parser()
    args = parser.parse_args(words)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    return handler(args)


def _parser() -> argparse.ArgumentParser:
    import argparse

    from ._version import __version__

    parser = argparse.ArgumentParser(
        prog="tokenrelay",
        description="Exchange a platform OIDC token for an API token, keep it fresh, serve it.",
    )
    parser.add_argument("--version", action="version", version=f"tokenrelay {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    from .lite import names
    from .sidecar import settings as runsettings  # standard library only: cheap

    run = commands.add_parser(
        "run",
        help="run the sidecar (the long-running token relay)",
        description="Run the sidecar. Every option is also an environment "
        "variable TOKENRELAY_<NAME> and a key of the --config TOML file.",
    )
    runsettings.add_arguments(run)
    run.set_defaults(handler=_run)

    token = commands.add_parser("token", help="print the current token from a running sidecar")
    token.add_argument("--audience", metavar="AUD", help="audience (default: the sidecar's API)")
    token.add_argument(
        "--socket",
        metavar="PATH",
        help=f"the sidecar's socket [env {names.SOCKET_ENV}, default {names.DEFAULT_SOCKET}]",
    )
    token.set_defaults(handler=_token)

    for name, (_, help_text) in PLUGINS.items():
        commands.add_parser(name, help=help_text, add_help=False)
    commands.add_parser(
        "go-auth",
        help="GOAUTH command for the go command: GOAUTH='command tokenrelay go-auth'",
        add_help=False,
    )
    return parser


def _run_plugin(name: str, words: list[str]) -> int:
    import argparse
    import importlib

    module_name, help_text = PLUGINS[name]
    module = importlib.import_module(module_name)
    # A plugin may bring its own parser class (exec: its command after "--", its own exit status)
    parser_class: type[argparse.ArgumentParser] = getattr(module, "Parser", argparse.ArgumentParser)
    parser = parser_class(prog=f"tokenrelay {name}", description=help_text)
    module.add_arguments(parser)
    status: int = module.run(parser.parse_args(words))
    return status


def _run(args: argparse.Namespace) -> int:
    from .errors import ConfigError
    from .sidecar import settings as runsettings

    try:
        settings = runsettings.load(args)
    except ConfigError as exc:
        print(f"tokenrelay run: {exc}", file=sys.stderr)
        return 2
    from .sidecar import logs

    logs.setup(settings.log_level, settings.log_format)
    return run_settings(settings, reload=lambda: runsettings.load(args))


def run_settings(settings: Settings, reload: Callable[[], Settings] | None = None) -> int:
    """Run the daemon (see daemon_loop_factory for its event loop); ``reload`` re-reads settings (SIGHUP)."""
    import asyncio

    from .errors import ConfigError

    prepare_daemon()
    from .sidecar import daemon

    try:
        with asyncio.Runner(loop_factory=daemon_loop_factory(settings)) as runner:
            return runner.run(daemon.serve(settings, reload=reload))
    except ConfigError as exc:
        print(f"tokenrelay run: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def prepare_daemon() -> None:
    """Call before importing ``sidecar.daemon`` (``run``, ``exec``): what its imports must find."""
    import os

    # Before aiohttp loads frozenlist: its C++ extension brings libstdc++ into the process, 1.2 MiB
    # of idle RSS (bench/idle_rss.py), for lists aiohttp freezes at start-up; the pure-Python twin
    # serves them as well. Set only when the user has not chosen.
    os.environ.setdefault("FROZENLIST_NO_EXTENSIONS", "1")
    from .sidecar.mimetable import load_aiohttp_web
    from .systemroots import no_default_roots

    with no_default_roots():  # aiohttp's import-time contexts: replaced by clienttls before any use
        load_aiohttp_web()  # before daemon's imports: aiohttp's file-type table skips /etc/mime.types


def run_service(
    name: str, main: Callable[[], Coroutine[object, object, int]], *, log_level: str, interrupted: int
) -> int:
    """A long-running command other than ``run`` (``dev``, ``emulate``): text logs on stderr (stdout
    carries the lines a user or a test reads), ``main()`` on uvloop, a ConfigError as its one line
    (exit 2), a missing package as one line too (the container image leaves the emulator's gRPC
    packages out), and Ctrl-C as exit status ``interrupted``."""
    import asyncio

    from .errors import ConfigError
    from .sidecar import logs

    logs.setup(log_level, "text")
    try:
        with asyncio.Runner(loop_factory=loop_factory(True)) as runner:
            return runner.run(main())
    except ConfigError as exc:
        print(f"tokenrelay {name}: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        print(
            f"tokenrelay {name}: this installation lacks the Python module {exc.name} (the container "
            "image leaves out the emulator's packages); run it where `pip install tokenrelay` installed "
            "all of them",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return interrupted


def loop_factory(uvloop: bool) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when asked for and installed, else None (asyncio's own)."""
    if not uvloop:
        return None
    try:
        import uvloop as fast_loop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = fast_loop.new_event_loop
    return factory


def daemon_loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop for the proxy only, where it pays; asyncio's own loop otherwise.

    Measured with bench/token_api.py: uvloop changes nothing for the local API (aiohttp's handler
    is the cost, not the loop) but adds 2 MiB to the idle RSS (40.5 against 38.6 MiB).
    """
    return loop_factory(settings.proxy_listen is not None)


def _token(args: argparse.Namespace) -> int:
    from .lite.socketclient import LocalApiError, fetch_token, socket_path

    path = socket_path(args.socket)
    try:
        reply = fetch_token(path, args.audience)
    except LocalApiError as exc:
        print(f"tokenrelay token: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(reply.token + "\n")
    return 0
