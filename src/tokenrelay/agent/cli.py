"""``tokenrelay agent``: the command line (its options: ``agent.options``)."""

from __future__ import annotations

import argparse

from ..config import add_options
from .options import ALL_OPTIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve every opted-in pod of this node (docs/agent.md): each request carries the pod's own "
        "projected service-account token, verified here, and one exchange per (service account, "
        "identity, audience) is shared by every pod of the node. Every option is also an "
        "environment variable TOKENRELAY_<NAME>."
    )
    add_options(parser, ALL_OPTIONS)


def run(args: argparse.Namespace) -> int:
    from ..cli import prepare_daemon, run_service
    from ..errors import ConfigError
    from . import options

    try:
        settings = options.load(args)
    except ConfigError as exc:
        import sys

        print(f"tokenrelay agent: {exc}", file=sys.stderr)
        return 2
    prepare_daemon()
    from . import service

    return run_service(
        "agent", lambda: service.serve(settings), log_level=settings.log_level, interrupted=130
    )
