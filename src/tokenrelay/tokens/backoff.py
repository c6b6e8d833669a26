"""Full-jitter exponential backoff (the AWS architecture blog's "full jitter").

Spreading retries uniformly over [0, ceiling] is what keeps ten thousand sidecars from hammering a
token service that has just come back, while still retrying within seconds after a blip.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# A Retry-After larger than this is taken as a mistake, not an instruction to stop for hours.
MAX_RETRY_AFTER = 300.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays before retry number ``failures`` (1 for the first retry)."""

    base: float = 1.0
    cap: float = 30.0

    def ceiling(self, failures: int) -> float:
        return min(self.cap, self.base * 2.0 ** max(0, min(failures - 1, 30)))

    def delay(
        self, failures: int, rng: random.Random, retry_after: float | None = None, window: float = 0.0
    ) -> float:
        """Full jitter over [0, ceiling], or over [0, window] when the caller can afford to wait longer."""
        delay = rng.uniform(0.0, max(self.ceiling(failures), window))
        if retry_after is not None and retry_after > 0:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
        return delay
