"""One run of a command under the relay: the sidecar that ``daemon.build`` composes from run's
settings, the command started once every audience holds its first token, the signals forwarded to
it, and its exit status.

Before the command starts, INT, TERM, HUP or QUIT stops the start (exit status 128+N, the command
never runs); after, each goes to the command, and the relay stops once the command has exited.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence

from ..errors import TokenRelayError
from ..lite.names import PROXY_URL_ENV
from ..sidecar.daemon import Sidecar
from ..sidecar.oneshot import get_within
from ..sidecar.settings import Settings
from ..tokens.token import Token
from .forwarding import FORWARDED

# What a terminal's keyboard sends to its whole foreground process group, the command included.
KEYBOARD = (signal.SIGINT, signal.SIGQUIT)
NOT_FOUND = 127  # as env(1) and the shells
NOT_EXECUTABLE = 126


class CommandFailed(Exception):
    """The command could not be started: ``status`` is 127 (not found) or 126 (not executable)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


async def run(
    sidecar: Sidecar,
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    export_token: str | None = None,
) -> int:
    """Serve, start ``command`` once the first tokens are held, and return its exit status (128+N
    when signal N killed it). Raises TokenRelayError when the relay cannot start or get a token,
    CommandFailed when the command cannot be run."""
    loop = asyncio.get_running_loop()
    starting = asyncio.ensure_future(_start(sidecar))
    early: list[int] = []
    child: asyncio.subprocess.Process | None = None
    keyboard_reaches_child = _in_terminal_foreground()

    def on_signal(signum: int) -> None:
        if child is None:
            early.append(signum)
            starting.cancel()
        elif not (keyboard_reaches_child and signum in KEYBOARD):
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    for signum in FORWARDED:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        try:
            api_token = await starting
        except asyncio.CancelledError:
            if early:
                return 128 + early[0]
            raise
        child_env = dict(env)
        if sidecar.proxy is not None:
            child_env[PROXY_URL_ENV] = proxy_url(sidecar.settings, sidecar.proxy.port)
        if export_token:
            child_env[export_token] = api_token.value
        child = await _spawn(command, child_env)
        for pending in early:  # came while the command was being started
            child.send_signal(pending)
        status = await child.wait()
        return 128 - status if status < 0 else status
    finally:
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        # Until the loop closes (and removes them), a signal finds the command gone and is dropped.
        await sidecar.stop()


async def _start(sidecar: Sidecar) -> Token:
    """Start serving and wait (retrying within --wait-timeout) for every audience's first token;
    the API's."""
    await sidecar.start()
    providers = sidecar.providers
    deadline = time.monotonic() + sidecar.settings.wait_timeout
    tokens = await asyncio.gather(
        *(
            get_within(providers.provider(audience), deadline, time.monotonic, asyncio.sleep)
            for audience in providers.audiences
        ),
        return_exceptions=True,
    )
    for result in tokens:
        if isinstance(result, BaseException):
            raise result
    first = tokens[0]
    assert isinstance(first, Token)  # the API's audience comes first (Settings.audiences)
    return first


async def _spawn(command: Sequence[str], env: Mapping[str, str]) -> asyncio.subprocess.Process:
    """The command, started with the standard streams it would have had without us. The PATH it
    is looked up on is its own (``env``'s), where the helpers' links come first."""
    try:
        return await asyncio.create_subprocess_exec(*command, env=env)
    except FileNotFoundError:
        raise CommandFailed(f"{command[0]}: command not found", NOT_FOUND) from None
    except OSError as exc:
        raise CommandFailed(f"{command[0]}: cannot run it: {exc.strerror or exc}", NOT_EXECUTABLE) from None


def proxy_url(settings: Settings, port: int) -> str:
    """The URL the command reaches the proxy at (the port it bound, when --proxy-listen asked for 0)."""
    host = (settings.proxy_listen or ("127.0.0.1", port))[0]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # a wildcard: reach it on loopback
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _in_terminal_foreground() -> bool:
    """Whether we run in the foreground process group of a terminal, where Ctrl-C and Ctrl-\\ reach
    the command directly: forwarding those too would deliver each twice."""
    try:
        return os.isatty(sys.stdin.fileno()) and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


__all__ = ["CommandFailed", "TokenRelayError", "run"]
