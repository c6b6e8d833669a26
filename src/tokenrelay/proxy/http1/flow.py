"""Why the proxy stops reading from a client: each reason named, reading resumed when none is left.

Like uvicorn's ``flow_control.py``: one object owns ``pause_reading``/``resume_reading`` on the
client's transport, so that two reasons overlapping (a full upstream while a pipelined request
waits its turn) cannot resume reading early. The reasons are plain int bits, not an ``enum.Flag``:
they are tested on every read, where an enum operation costs a microsecond.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

UPSTREAM_FULL = 1  # the upstream's socket buffer is full
QUEUED = 2  # a pipelined request waits for the one before it
PENDING_FULL = 4  # the body held for a request with no upstream connection yet is large
STOPPED = 8  # nothing more will be read (refused, or closing)
UPGRADING = 16  # an upgrade request waits for its 101: what follows is not HTTP, or not ours to send


class ReadFlow:
    """The reasons reading from one client is paused, and since when."""

    __slots__ = ("_clock", "_since", "_transport", "reasons")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.reasons = 0
        self._since = 0.0
        self._clock = clock
        self._transport: asyncio.Transport | None = None

    def attach(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def detach(self) -> None:
        """The connection is closing: leave its transport alone from now on."""
        self._transport = None

    def pause(self, reason: int) -> None:
        if not self.reasons and self._transport is not None:
            self._transport.pause_reading()
            self._since = self._clock()
        self.reasons |= reason

    def resume(self, reason: int) -> float:
        """Drop ``reason``; if none is left, reading resumes: then the seconds it was paused, else 0."""
        if self.reasons & reason:
            self.reasons &= ~reason
            if not self.reasons and self._transport is not None:
                self._transport.resume_reading()
                return self._clock() - self._since
        return 0.0
