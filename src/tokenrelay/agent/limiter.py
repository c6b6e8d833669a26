"""The node's exchange budget: at most ``rate`` exchanges a second (a burst of one second's worth),
all keys together, and a pause for everyone when the token service says it is overloaded (429 or
``RESOURCE_EXHAUSTED``, for as long as its ``Retry-After`` asks). Eks-pod-identity-agent's users
were throttled for want of exactly this (#171, #34)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

DEFAULT_PAUSE = 1.0  # seconds, when an overloaded service gives no Retry-After


class ExchangeLimiter:
    """A GCRA rate limit with a pause; ``acquire`` waits for the next slot and says how long."""

    def __init__(
        self,
        rate: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_wait: Callable[[float], None] = lambda seconds: None,
    ) -> None:
        self._interval = 1.0 / rate
        self._burst = float(rate) * self._interval  # one second's worth
        self._clock = clock
        self._sleep = sleep
        self._on_wait = on_wait
        self._tat = 0.0  # theoretical arrival time of the next exchange
        self._paused_until = 0.0

    async def acquire(self) -> None:
        waited = 0.0
        while True:
            now = self._clock()
            tat = max(self._tat, now)
            start = max(tat + self._interval - self._burst, self._paused_until)
            if start <= now:
                self._tat = tat + self._interval
                break
            waited += start - now
            await self._sleep(start - now)
        if waited:
            self._on_wait(waited)

    def pause(self, seconds: float | None) -> None:
        """The service is overloaded: no exchange for ``seconds`` (its Retry-After)."""
        until = self._clock() + (seconds if seconds is not None and seconds > 0 else DEFAULT_PAUSE)
        self._paused_until = max(self._paused_until, until)
