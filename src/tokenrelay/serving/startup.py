"""How a long-running command starts and ends: aiohttp loaded lean, its event loop, and the outcomes
every command words alike (a ConfigError as one line and exit status 2, Ctrl-C as a status).

``run``, ``exec``, ``agent``, ``emulate`` and ``dev`` start here; ``cli`` stays the entry point and
imports none of it until a command runs, so that ``tokenrelay token`` starts in milliseconds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import asyncio

Main = Callable[[], Coroutine[object, object, int]]
LoopFactory = Callable[[], "asyncio.AbstractEventLoop"]


class CommandSettings(Protocol):
    """What ``run_command`` reads of a command's settings: how to log."""

    @property
    def log_level(self) -> str: ...

    @property
    def log_format(self) -> str: ...


S = TypeVar("S", bound=CommandSettings)


def run_command(
    name: str,
    load: Callable[[], S],
    main: Callable[[S], Coroutine[object, object, int]],
    *,
    loop_for: Callable[[S], LoopFactory | None] = lambda settings: None,
) -> int:
    """A long-running command from its flags to its exit status: its settings (``load()``; a
    ConfigError as ``tokenrelay NAME: message``, exit 2), its logs as they say, aiohttp loaded lean,
    then ``main(settings)`` on ``loop_for(settings)``'s loop (``run_until_done``). ``main`` imports
    what loads aiohttp in its body: it runs after ``prepare_daemon``."""
    from ..errors import ConfigError
    from . import logs

    try:
        settings = load()
    except ConfigError as exc:
        print(f"tokenrelay {name}: {exc}", file=sys.stderr)
        return 2
    logs.setup(settings.log_level, settings.log_format)
    prepare_daemon()
    return run_until_done(name, lambda: main(settings), loop_factory=loop_for(settings))


def prepare_daemon() -> None:
    """Call before importing ``sidecar.daemon`` (``run``, ``exec``): what its imports must find."""
    import os

    # Before aiohttp loads frozenlist: its C++ extension brings libstdc++ into the process, 1.2 MiB
    # of idle RSS (bench/idle_rss.py), for lists aiohttp freezes at start-up; the pure-Python twin
    # serves them as well. Set only when the user has not chosen.
    os.environ.setdefault("FROZENLIST_NO_EXTENSIONS", "1")
    from ..systemroots import no_default_roots
    from .mimetable import load_aiohttp_web

    with no_default_roots():  # aiohttp's import-time contexts: replaced by clienttls before any use
        load_aiohttp_web()  # before daemon's imports: aiohttp's file-type table skips /etc/mime.types


def run_until_done(
    name: str, main: Main, *, loop_factory: LoopFactory | None = None, interrupted: int = 130
) -> int:
    """``main()``'s exit status; a ConfigError raised on the way as ``tokenrelay NAME: message``
    on stderr (exit 2), and Ctrl-C as ``interrupted``."""
    import asyncio

    from ..errors import ConfigError

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main())
    except ConfigError as exc:
        print(f"tokenrelay {name}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return interrupted


def run_service(name: str, main: Main, *, log_level: str, interrupted: int) -> int:
    """A long-running command other than ``run`` (``dev``, ``emulate``): text logs on stderr (stdout
    carries the lines a user or a test reads), ``main()`` on uvloop, a ConfigError as its one line
    (exit 2), a missing package as one line too (the container image leaves the emulator's gRPC
    packages out), and Ctrl-C as exit status ``interrupted``."""
    from . import logs

    logs.setup(log_level, "text")
    try:
        return run_until_done(name, main, loop_factory=loop_factory(True), interrupted=interrupted)
    except ModuleNotFoundError as exc:
        print(
            f"tokenrelay {name}: this installation lacks the Python module {exc.name} (the container "
            "image leaves out the emulator's packages); run it where `pip install tokenrelay` installed "
            "all of them",
            file=sys.stderr,
        )
        return 2


def loop_factory(uvloop: bool) -> LoopFactory | None:
    """uvloop's loop when asked for and installed, else None (asyncio's own)."""
    if not uvloop:
        return None
    try:
        import uvloop as fast_loop
    except ImportError:
        return None
    factory: LoopFactory = fast_loop.new_event_loop
    return factory
