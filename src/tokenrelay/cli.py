"""The ``tokenrelay`` command. Subcommands import what they need when they run, so that
``tokenrelay token`` starts in milliseconds and never loads aiohttp."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: ``tokenrelay go-auth`` is a helper, and pays for every import
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence


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
        "tokenrelay.exec.cli",
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
    from .sidecar.command import run

    return run(args)


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
