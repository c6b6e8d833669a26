"""``tokenrelay agent``: the command line (its options: ``agent.options``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..options import add_options
from .options import ALL_OPTIONS

if TYPE_CHECKING:
    from .options import AgentSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve every opted-in pod of this node (docs/agent.md): each request carries the pod's own "
        "projected service-account token, verified here, and one exchange per (service account, "
        "identity, audience) is shared by every pod of the node. Every option is also an "
        "environment variable TOKENRELAY_<NAME>."
    )
    add_options(parser, ALL_OPTIONS)


def run(args: argparse.Namespace) -> int:
    from ..serving.startup import run_command
    from . import options

    # asyncio's own loop (run_command's default), as run's local API has it: uvloop adds 2 MiB of
    # RSS and nothing here needs it (bench/token_api.py: aiohttp's handler is the cost, not the loop).
    return run_command("agent", lambda: options.load(args), _serve)


async def _serve(settings: AgentSettings) -> int:
    from . import service  # after prepare_daemon: it loads aiohttp

    return await service.serve(settings)
