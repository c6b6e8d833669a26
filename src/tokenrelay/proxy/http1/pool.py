"""Keep-alive connections to the upstream, reused last-in first-out.

A connection returns to the pool only when its last request ended cleanly (the request sent in
full, the answer read in full, no ``Connection: close``). The upstream may close an idle connection at
any time; the pool forgets it when it notices, and the client side retries a request once on a new
connection when a reused one dies before answering (see request.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ..target import Target
from .upstream import UpstreamConnection

MAX_IDLE = 256


class UpstreamPool:
    """Idle connections to the one upstream."""

    def __init__(
        self,
        upstream: Target,
        *,
        connect_timeout: float,
        idle_timeout: float,
        max_idle: int = MAX_IDLE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = upstream
        self._clock = clock
        self._connect_timeout = connect_timeout
        self._idle_timeout = idle_timeout
        self._max_idle = max_idle
        self._idle: list[UpstreamConnection] = []
        self._closed = False

    def take(self) -> UpstreamConnection | None:
        """An idle connection, or None."""
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not conn.closed and self._clock() - conn.idle_since < self._idle_timeout:
                conn.reused = True
                return conn
            conn.close()
        return None

    async def connect(self) -> UpstreamConnection:
        """A new connection; raises OSError (unreachable) or TimeoutError."""
        upstream = self.upstream
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._connect_timeout):
            _, conn = await loop.create_connection(
                lambda: UpstreamConnection(self),
                upstream.host,
                upstream.port,
                ssl=upstream.ssl,
                server_hostname=upstream.host if upstream.ssl else None,
            )
        return conn

    def release(self, conn: UpstreamConnection, reusable: bool) -> None:
        conn.unbind()
        if reusable and not conn.closed and not self._closed and len(self._idle) < self._max_idle:
            conn.idle_since = self._clock()
            self._idle.append(conn)
        else:
            conn.close()

    def forget(self, conn: UpstreamConnection) -> None:
        """``conn`` was closed by the upstream while idle."""
        if conn in self._idle:
            self._idle.remove(conn)

    def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()
