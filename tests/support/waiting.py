"""The one way to wait for something that happens in another task, thread or process: poll a
predicate against a deadline, and fail naming what never happened. Timing is never asserted."""

from __future__ import annotations

import asyncio
import os
import select
import time
from collections.abc import Callable
from typing import IO


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


class Lines:
    """The lines of a subprocess's pipe, each waited for against a deadline: a line that never comes
    fails naming what was awaited, where ``readline()`` would block for good."""

    def __init__(self, pipe: IO[bytes], timeout: float = 20.0) -> None:
        self._fd = pipe.fileno()  # read raw: a buffered reader's data is invisible to select()
        self._buffer = b""
        self._timeout = timeout

    def next(self, what: str, timeout: float | None = None) -> str:
        """The next line, without its newline; AssertionError naming ``what`` at the deadline or EOF."""
        limit = self._timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {limit:g}s waiting for {what}")
            if select.select([self._fd], [], [], left)[0]:
                chunk = os.read(self._fd, 4096)
                if not chunk:
                    raise AssertionError(f"the output ended before {what} (so far: {self._buffer!r})")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()
