"""One exchange per (service account, identity, audience) on the node, kept fresh by the sidecar's
own ``TokenProvider`` (its refresh policy, single flight, backoff), shared by every pod of that
service account.

A key's provider exchanges the freshest valid token held from a pod of that service account that
still runs here. When no such pod has presented a valid token for longer than the key's token life,
the key is dropped and never refreshed again (eks-pod-identity-agent renewed for pods long gone:
#171, #92). The cache is bounded: at ``max_entries``, the key asked for least recently goes.

One service account cannot spend the node's exchange budget: its exchanges wait for its own
budget (``account_rate`` a second) before the node's. A key the token service refuses (a 4xx: an
audience made up, an identity that does not trust the account) is dropped, so it is not retried in
the background, and the refusal is answered from memory for ``refusal_ttl`` seconds: in one run,
537 of a node's 539 exchanges went to one pod's refusals (issue 28, item 9).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ExchangeError, IdTokenError
from ..tokens.provider import Observer, TokenProvider
from ..tokens.sts import Issued
from ..tokens.token import Token
from .limiter import ExchangeLimiter
from .pods import NodePods
from .podtoken import PodToken

log = logging.getLogger("tokenrelay.agent")

SWEEP_EVERY = 30.0  # seconds between looks for keys no pod asks for any more
IDLE_BEFORE_TOKEN = 600.0  # a key that never got a token: dropped after this long unasked
MAX_REFUSED = 4096  # refusals remembered, the oldest forgotten first
RESOURCE_EXHAUSTED = 8


@dataclass(frozen=True, slots=True)
class Key:
    namespace: str
    service_account: str
    identity: str
    audience: str

    @property
    def account(self) -> tuple[str, str]:
        return self.namespace, self.service_account


# The wire call: (audience, identity, the pod's token) -> the service's answer.
Exchange = Callable[[str, str, str], Awaitable[Issued]]


class _Account:
    """One service account's own: its pods' tokens (the freshest of each running pod), when one
    last presented a token, and its exchange budget. Each of its keys' exchanges reads it directly."""

    __slots__ = ("budget", "last_seen", "pods")

    def __init__(self, budget: ExchangeLimiter, now: float) -> None:
        self.budget = budget
        self.pods: dict[str, PodToken] = {}  # by pod uid
        self.last_seen = now

    def present(self, pod: PodToken, now: float) -> None:
        known = self.pods.get(pod.pod_uid)
        if known is None or known.expires < pod.expires:
            self.pods[pod.pod_uid] = pod
        self.last_seen = now

    def freshest(self, running: Callable[[str], bool], wall: float) -> PodToken | None:
        """The freshest token held of a pod that still runs here and has time left."""
        held = self.pods
        for uid in [uid for uid, pod in held.items() if not running(uid) or pod.expires <= wall]:
            del held[uid]
        return max(held.values(), key=lambda pod: pod.expires, default=None)


class _Entry:
    __slots__ = ("provider", "task")

    def __init__(self, provider: TokenProvider, task: asyncio.Task[None]) -> None:
        self.provider = provider
        self.task = task


class Exchanges:
    """The node's tokens by Key, and, by service account, the pod tokens their exchanges use."""

    def __init__(
        self,
        exchange: Exchange,
        pods: NodePods,
        limiter: ExchangeLimiter,
        *,
        max_entries: int,
        wait_timeout: float,
        account_rate: int,
        refusal_ttl: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        observers: Sequence[Observer] = (),
        on_size: Callable[[int], None] = lambda size: None,
    ) -> None:
        self._exchange = exchange
        self._pods = pods
        self._limiter = limiter
        self._max_entries = max_entries
        self._wait_timeout = wait_timeout
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._observers = tuple(observers)
        self._on_size = on_size
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._account_rate = account_rate
        self._accounts: dict[tuple[str, str], _Account] = {}  # swept with their last key
        self._refusal_ttl = refusal_ttl
        self._refused: OrderedDict[Key, tuple[float, ExchangeError]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def providers(self) -> list[TokenProvider]:
        """Every key's provider, least recently asked for first."""
        return [entry.provider for entry in self._entries.values()]

    # -- the request path -----------------------------------------------------------------------

    def provider(self, pod: PodToken, key: Key) -> TokenProvider:
        """Record ``pod`` (a verified token of a pod running here, asking for ``key`` of its own
        account: the freshest of the account's tokens is what its exchanges use) and return the
        key's provider, made (and its schedule started) on first use."""
        account = self._accounts.get(key.account)
        if account is None:
            budget = ExchangeLimiter(self._account_rate, clock=self._clock, sleep=self._sleep)
            account = self._accounts[key.account] = _Account(budget, self._clock())
        account.present(pod, self._clock())
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            return entry.provider
        while len(self._entries) >= self._max_entries:
            oldest, _ = next(iter(self._entries.items()))
            self._drop(oldest, "cache full")
        provider = TokenProvider(
            key.audience,
            lambda audience: self._fetch(key, account),
            clock=self._clock,
            wall=self._wall,
            sleep=self._sleep,
            rng=self._rng,
            wait_timeout=self._wait_timeout,
            observers=self._observers,
        )
        self._entries[key] = _Entry(provider, asyncio.ensure_future(provider.run()))
        self._on_size(len(self._entries))
        return provider

    def refusal(self, key: Key) -> ExchangeError | None:
        """The token service's refusal of ``key``, while it is remembered."""
        found = self._refused.get(key)
        if found is None:
            return None
        until, error = found
        if until <= self._clock():
            del self._refused[key]
            return None
        return error

    def refused(self, key: Key, error: ExchangeError) -> None:
        """The token service refused ``key`` for good: remember its words, drop its provider."""
        self._refused[key] = (self._clock() + self._refusal_ttl, error)
        self._refused.move_to_end(key)
        if len(self._refused) > MAX_REFUSED:
            self._refused.popitem(last=False)
        entry = self._entries.get(key)
        if entry is not None and entry.provider.token is None:  # a held token keeps serving
            self._drop(key, "refused by the token service")

    # -- the exchange -----------------------------------------------------------------------

    async def _fetch(self, key: Key, account: _Account) -> Issued:
        pod = account.freshest(self._pods.running, self._wall())
        if pod is None:
            raise IdTokenError(
                f"no pod of service account {key.namespace}/{key.service_account} running on this "
                "node holds a valid token"
            )
        await account.budget.acquire()
        await self._limiter.acquire()
        try:
            return await self._exchange(key.audience, key.identity, pod.value)
        except ExchangeError as exc:
            if exc.status == 429 or exc.code == RESOURCE_EXHAUSTED:
                self._limiter.pause(exc.retry_after)
            raise

    # -- upkeep -----------------------------------------------------------------------------

    def sweep(self) -> int:
        """Drop the keys whose service account no pod has asked for in over a token's life; how many."""
        now = self._clock()
        dropped = 0
        for key, entry in list(self._entries.items()):
            token: Token | None = entry.provider.token
            idle_limit = token.lifetime if token is not None else IDLE_BEFORE_TOKEN
            account = self._accounts.get(key.account)
            if account is not None and now - account.last_seen > idle_limit:
                self._drop(key, "no pod asked for a token life")
                dropped += 1
        live = {key.account for key in self._entries}
        for name in [name for name in self._accounts if name not in live]:
            del self._accounts[name]
        for key in [key for key, (until, _) in self._refused.items() if until <= now]:
            del self._refused[key]
        return dropped

    async def run(self) -> None:
        """Sweep until cancelled."""
        while True:
            await self._sleep(SWEEP_EVERY)
            self.sweep()

    def _drop(self, key: Key, why: str) -> None:
        entry = self._entries.pop(key)
        entry.task.cancel()
        running = entry.provider.in_flight
        if running is not None:
            running.cancel()
        self._on_size(len(self._entries))
        log.info(
            "token dropped",
            extra={
                "namespace": key.namespace,
                "serviceAccount": key.service_account,
                "identity": key.identity,
                "audience": key.audience,
                "why": why,
            },
        )

    async def stop(self) -> None:
        tasks: list[asyncio.Future[Any]] = [entry.task for entry in self._entries.values()]
        tasks += [e.provider.in_flight for e in self._entries.values() if e.provider.in_flight is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._entries.clear()
        self._on_size(0)
