"""``tokenrelay run``: its settings read, its logs set up, and the daemon on its event loop.

``exec`` runs the same daemon beside its command, on the same loop (``daemon_loop_factory``).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: imported before aiohttp, which prepare_daemon must precede
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from ..config import Settings
    from ..serving.startup import LoopFactory


def run(args: argparse.Namespace) -> int:
    from .. import config
    from ..errors import ConfigError
    from ..serving import logs

    try:
        settings = config.load(args)
    except ConfigError as exc:
        print(f"tokenrelay run: {exc}", file=sys.stderr)
        return 2
    logs.setup(settings.log_level, settings.log_format)
    return run_settings(settings, reload=lambda: config.load(args))


def run_settings(settings: Settings, reload: Callable[[], Settings] | None = None) -> int:
    """Run the daemon (see daemon_loop_factory for its event loop); ``reload`` re-reads settings (SIGHUP)."""
    from ..serving.startup import prepare_daemon, run_until_done

    prepare_daemon()
    from . import daemon

    return run_until_done(
        "run", lambda: daemon.serve(settings, reload=reload), loop_factory=daemon_loop_factory(settings)
    )


def daemon_loop_factory(settings: Settings) -> LoopFactory | None:
    """uvloop for the proxy only, where it pays; asyncio's own loop otherwise.

    Measured with bench/token_api.py: uvloop changes nothing for the local API (aiohttp's handler
    is the cost, not the loop) but adds 2 MiB to the idle RSS (40.5 against 38.6 MiB).
    """
    from ..serving.startup import loop_factory

    return loop_factory(settings.proxy_listen is not None)
