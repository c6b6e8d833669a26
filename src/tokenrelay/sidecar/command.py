"""``tokenrelay run``: its settings read, its logs set up, and the daemon on its event loop.

``exec`` runs the same daemon beside its command, on the same loop (``daemon_loop_factory``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Coroutine

    from ..serving.startup import LoopFactory
    from .settings import Settings


def run(args: argparse.Namespace) -> int:
    from ..serving.startup import run_command
    from . import settings as runsettings

    def serve(settings: Settings) -> Coroutine[object, object, int]:
        from . import daemon  # after prepare_daemon: see run_command

        return daemon.serve(settings, reload=lambda: runsettings.load(args))

    return run_command("run", lambda: runsettings.load(args), serve, loop_for=daemon_loop_factory)


def daemon_loop_factory(settings: Settings) -> LoopFactory | None:
    """uvloop for the proxy only, where it pays; asyncio's own loop otherwise.

    Measured with bench/token_api.py: uvloop changes nothing for the local API (aiohttp's handler
    is the cost, not the loop) but adds 2 MiB to the idle RSS (40.5 against 38.6 MiB).
    """
    from ..serving.startup import loop_factory

    return loop_factory(settings.proxy_listen is not None)
