"""Batched writes of the HTTP/2 side: frames h2 queued are written once per event batch, not per frame."""

from __future__ import annotations

from typing import Protocol


class Flushable(Protocol):
    def flush(self) -> None: ...


class Flusher:
    """Connections with frames waiting in h2; written once per event batch instead of once per frame."""

    def __init__(self) -> None:
        self.dirty: list[Flushable] = []

    def run(self) -> None:
        dirty = self.dirty
        while dirty:
            batch = dirty[:]
            dirty.clear()
            for conn in batch:
                conn.flush()
