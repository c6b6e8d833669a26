"""The upstream's deadline for one request, as the sweep judges it: one rule for both front ends.

The upstream must answer a request's head within ``upstream_timeout`` of the request being sent in
full, and after that (relaying the answer's body, or taking a request body it had stopped taking)
make some progress, a read or a drained write, at least once per ``upstream_timeout``. The hot path
only starts the clock when a request is sent; the sweep, about once a second, does the rest.
"""

from __future__ import annotations

AWAITING_HEAD = -1  # the progress to pass while the answer's head is due: it never moves the deadline


class Deadline:
    """Since when the upstream has made no progress on one request."""

    __slots__ = ("seen", "since")

    def __init__(self) -> None:
        self.seen = AWAITING_HEAD  # the progress count at the last look
        self.since = 0.0

    def start(self, now: float) -> None:
        """The clock runs from ``now`` (the request sent in full, or nothing owed by the upstream)."""
        self.seen = AWAITING_HEAD
        self.since = now

    def recount(self) -> None:
        """A new connection carries the request: its progress count starts afresh."""
        self.seen = AWAITING_HEAD

    def overdue(self, progress: int, now: float, timeout: float) -> bool:
        """Whether ``timeout`` has passed with ``progress`` (a count that grows with everything the
        upstream does; ``AWAITING_HEAD`` while the answer's head is due) unchanged since ``start``
        or since the last look that saw it change."""
        if progress != self.seen:
            self.seen = progress
            self.since = now
            return False
        return now - self.since > timeout
