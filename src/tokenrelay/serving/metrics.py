"""What the Prometheus metrics of every command that exchanges (``run``'s, the node agent's) share,
so that one dashboard reads both alike."""

from __future__ import annotations

# An exchange normally takes tens of milliseconds; --exchange-timeout defaults to 10 s.
EXCHANGE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
