"""``tokenrelay agent``: the command line (its options: ``agent.options``)."""

from __future__ import annotations

import argparse
import sys

from ..options import add_options
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
    import asyncio

    from ..errors import ConfigError
    from ..serving import logs
    from ..serving.startup import prepare_daemon
    from . import options

    try:
        settings = options.load(args)
    except ConfigError as exc:
        print(f"tokenrelay agent: {exc}", file=sys.stderr)
        return 2
    logs.setup(settings.log_level, settings.log_format)
    prepare_daemon()
    from . import service

    # asyncio's own loop, as run's local API has it: uvloop adds 2 MiB of RSS and nothing here
    # (bench/token_api.py: aiohttp's handler is the cost, not the loop).
    try:
        with asyncio.Runner() as runner:
            return runner.run(service.serve(settings))
    except ConfigError as exc:
        print(f"tokenrelay agent: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
