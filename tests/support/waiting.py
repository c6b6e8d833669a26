"""The one way to wait for something that happens in another task, thread or process: poll a
predicate against a deadline, and fail naming what never happened. Timing is never asserted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(
    predicate: Callable[[], bool], what: str = "the condition", timeout: float = 15.0
) -> None:
    """Let the event loop run until ``predicate()`` holds; AssertionError naming ``what`` at ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.001)


def eventually_blocking(
    predicate: Callable[[], bool], what: str = "the condition", timeout: float = 20.0
) -> None:
    """``eventually`` for code outside an event loop (servers in threads, subprocesses)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)
