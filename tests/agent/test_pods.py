"""The node's pods as the agent knows them: a pod's request that waits for the watch's news."""

from __future__ import annotations

import asyncio

import pytest

from tokenrelay.agent.pods import NodePods

from ..support.cancelling import cancel_as_it_wakes


async def test_a_newcomers_wait_cancelled_as_the_watch_tells_of_it_is_cancelled() -> None:
    """A request waiting for its pod to appear, cancelled (the client gone, the agent stopping) just
    as the watch reports the pod, ends cancelled instead of going on as if nothing happened."""
    pods = NodePods()
    pods.replace(["other"])
    waiting = asyncio.ensure_future(pods.wait_for("newcomer"))
    await asyncio.sleep(0)  # it waits for news now
    assert not waiting.done()
    cancel_as_it_wakes(waiting)
    pods.seen("ADDED", "newcomer", "Running")
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert waiting.cancelled() and pods.running("newcomer")


async def test_a_newcomer_the_watch_tells_of_is_let_in() -> None:
    """A pod unknown to the watch waits for its news, and is let in when the watch reports it; one it
    never reports is refused at the wait's end."""
    pods = NodePods()
    pods.replace([])
    waiting = asyncio.ensure_future(pods.wait_for("newcomer"))
    await asyncio.sleep(0)
    pods.seen("ADDED", "elsewhere", "Running")
    await asyncio.sleep(0)
    assert not waiting.done()
    pods.seen("ADDED", "newcomer", "Pending")
    assert await waiting
    assert await pods.wait_for("never", timeout=0.05) is False
