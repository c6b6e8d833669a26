"""Batched writes of the HTTP/2 side: the frames a connection's ``session`` queued are written once per
event batch, not once per frame."""

from __future__ import annotations

from typing import Protocol


class Flushable(Protocol):
    def flush(self) -> None: ...


class Flusher:
    """Connections with frames waiting in their ``session``; each written once per event batch."""

    def __init__(self) -> None:
        self.dirty: list[Flushable] = []

    def run(self) -> None:
        dirty = self.dirty
        while dirty:
            batch = dirty[:]
            dirty.clear()
            for conn in batch:
                conn.flush()
