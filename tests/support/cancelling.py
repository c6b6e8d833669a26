"""A cancel that lands as the awaited call completes: the race Python 3.11's ``asyncio.wait_for``
loses (gh-86296): woken by the cancel after its inner call has finished, it returns the call's result
and the cancel is gone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def cancel_as_it_wakes(task: asyncio.Task[Any], armed: Callable[[], bool] = lambda: True) -> None:
    """Cancel ``task`` once ``armed()`` holds, at the first moment the future it waits on is done and
    before it resumes: the cancel and the call's completion meet in one turn of the loop."""
    loop = asyncio.get_running_loop()

    def look() -> None:
        if task.done():
            return
        waiting = task._fut_waiter  # type: ignore[attr-defined]  # what CPython's Task awaits now
        if waiting is not None and waiting.done() and armed():
            task.cancel()
            return
        # again next turn, queued ahead of any wake-up the rest of this turn schedules
        loop.call_soon(look)

    loop.call_soon(look)
