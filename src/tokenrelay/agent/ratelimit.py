"""The agent's request rate limits, as middleware around the token handler (SPIRE's
``endpoints/ratelimit.go``): per client connection, before the pod's token is read, and per
verified pod (its uid), after. Our own clients open a connection per request, so only the second
bounds a pod: one pod asked 3,616 times a second, and nothing said no (issue 28, item 9).

Both are GCRA (a token bucket without a timer): ``rate`` a second with a burst of ``burst``. A refused
request gets a 429 ``RESOURCE_EXHAUSTED`` with ``Retry-After``, in the agent's AIP-193 shape
(``refusals.RATE_LIMITED``, ``refusals.POD_RATE_LIMITED``). Nothing of them is in the handler.
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from . import refusals
from .podtoken import PodToken

# Verified pods whose request times are kept: a node's pods many times over. A pod dropped from it
# starts again with a full burst, which is what it would have had after a second's pause anyway.
MAX_PODS = 4096

POD: web.RequestKey[PodToken] = web.RequestKey("pod", PodToken)
Refuse = Callable[[str], None]


class Gcra:
    """``rate`` a second, ``burst`` at once, per key (a bounded number of keys, least recent first)."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic, max_keys: int = MAX_PODS
    ) -> None:
        self._interval = 1.0 / rate
        self._tolerance = (burst - 1) * self._interval
        self._clock = clock
        self._max_keys = max_keys
        self._tat: OrderedDict[Hashable, float] = OrderedDict()  # theoretical arrival time per key

    def wait(self, key: Hashable) -> float:
        """0.0 when ``key`` may go now (counted), else how many seconds until it may."""
        now = self._clock()
        tat = max(self._tat.get(key, now), now)
        early = tat - now - self._tolerance
        if early > 1e-9:  # 1e-9: float sums of the interval
            return early
        self._tat[key] = tat + self._interval
        self._tat.move_to_end(key)
        if len(self._tat) > self._max_keys:
            self._tat.popitem(last=False)
        return 0.0


class ConnectionRates:
    """At most ``rate`` requests a second on one connection (GCRA, a second's burst)."""

    def __init__(self, rate: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = 1.0 / rate
        self._clock = clock
        # per transport: the theoretical arrival time of its next request; gone with the connection
        self._tat: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()

    def allow(self, connection: object) -> bool:
        now = self._clock()
        tat = max(self._tat.get(connection, now), now)
        if tat - now > 1.0 - self._interval + 1e-9:  # 1e-9: float sums of the interval
            return False
        self._tat[connection] = tat + self._interval
        return True


def per_connection(
    rates: ConnectionRates, refused: Refuse, applies: Callable[[web.Request], bool]
) -> Middleware:
    """429 RATE_LIMITED past ``rates`` on one connection, for the requests ``applies`` to."""

    @web.middleware
    async def limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        if applies(request) and request.transport is not None and not rates.allow(request.transport):
            refused(refusals.RATE_LIMITED.reason)
            return refusals.RATE_LIMITED.refuse().answer()
        return await handler(request)

    return limit


def per_pod(rates: Gcra, refused: Refuse) -> Middleware:
    """429 POD_RATE_LIMITED past ``rates`` for one verified pod (``request[POD]``, set before)."""

    @web.middleware
    async def limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        pod = request.get(POD)
        if pod is not None:
            wait = rates.wait(pod.pod_uid)
            if wait:
                refused(refusals.POD_RATE_LIMITED.reason)
                limited = refusals.POD_RATE_LIMITED.refuse(
                    retry_after=wait, namespace=pod.namespace, pod=pod.pod_name
                )
                return limited.answer()
        return await handler(request)

    return limit
