"""Which pods run on this node, from a watch of the API server (field selector ``spec.nodeName``).

A token of a pod that is deleted, or has finished, is refused although its signature is still good:
``running`` is the last word. A pod kubelet has just started may ask before the watch has told us of
it, so an unknown uid waits (boundedly) for the watch's next news before it is refused.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from lightkube.resources.core_v1 import Pod

log = logging.getLogger("tokenrelay.agent")

FINISHED = frozenset({"Succeeded", "Failed"})
NEWCOMER_WAIT = 5.0  # seconds a pod unknown to the watch may wait for it to catch up
MAX_GONE = 4096  # uids remembered as deleted or finished, refused without that wait


class NodePods:
    """The uids of the pods running on this node; ``changed`` wakes whoever waits for news."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._uids: set[str] = set()
        self._gone: OrderedDict[str, None] = OrderedDict()
        self._news = asyncio.Event()
        self.listed = asyncio.Event()  # set by the first list

    @property
    def synced(self) -> bool:
        return self.listed.is_set()

    def __len__(self) -> int:
        return len(self._uids)

    def running(self, uid: str) -> bool:
        return uid in self._uids

    async def wait_for(self, uid: str, timeout: float = NEWCOMER_WAIT) -> bool:
        """True once ``uid`` runs here; False when the watch has not said so within ``timeout``."""
        deadline = self._clock() + timeout
        while uid not in self._uids:
            left = deadline - self._clock()
            if left <= 0 or not self.synced or uid in self._gone:
                return False
            # the news, or the end of the wait on the injected clock, whichever comes first; a
            # cancel (the asker gone) that lands as the news does still ends this cancelled
            news = asyncio.ensure_future(self._news.wait())
            timer = asyncio.ensure_future(self._sleep(left))
            try:
                await asyncio.wait((news, timer), return_when=asyncio.FIRST_COMPLETED)
            finally:
                news.cancel()
                timer.cancel()
        return True

    def replace(self, uids: Iterable[str]) -> None:
        """A fresh list of the node's pods (start-up, and after a broken watch)."""
        self._uids = set(uids)
        self.listed.set()
        self._announce()

    def seen(self, kind: str, uid: str, phase: str | None) -> None:
        """One watch event: ADDED, MODIFIED or DELETED."""
        if kind == "DELETED" or phase in FINISHED:
            self._uids.discard(uid)
            self._gone[uid] = None
            if len(self._gone) > MAX_GONE:
                self._gone.popitem(last=False)
        else:
            self._uids.add(uid)
        self._announce()

    def _announce(self) -> None:
        news, self._news = self._news, asyncio.Event()
        news.set()


def _uid_and_phase(pod: Pod) -> tuple[str, str | None]:
    uid = pod.metadata.uid if pod.metadata is not None else None
    phase = pod.status.phase if pod.status is not None else None
    return uid or "", phase


async def watch(client: AsyncClient, node: str, pods: NodePods, rng: random.Random | None = None) -> None:
    """List then watch the node's pods into ``pods`` until cancelled; a broken watch lists again."""
    from lightkube.resources.core_v1 import Pod

    rng = rng or random.Random()
    fields: dict[str, Any] = {"spec.nodeName": node}
    failures = 0
    while True:
        try:
            listed = client.list(Pod, namespace="*", fields=fields)
            uids = []
            async for pod in listed:
                uid, phase = _uid_and_phase(pod)
                if uid and phase not in FINISHED:
                    uids.append(uid)
            pods.replace(uids)
            version = listed.resourceVersion
            log.info("pods listed", extra={"node": node, "pods": len(uids)})
            failures = 0
            async for kind, pod in client.watch(Pod, namespace="*", fields=fields, resource_version=version):
                uid, phase = _uid_and_phase(pod)
                if uid:
                    pods.seen(kind, uid, phase)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # lightkube's ApiError, httpx's errors: list again after a pause
            failures += 1
            delay = rng.uniform(0, min(30.0, 0.5 * 2**failures))
            log.warning(
                "pod watch broken",
                extra={"error": f"{type(exc).__name__}: {exc}", "retryIn": round(delay, 2)},
            )
            await asyncio.sleep(delay)
