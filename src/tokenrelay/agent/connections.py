"""The agent's connections, bounded: every pod of the node can open its socket, so what one pod's
connections may hold is capped here, before aiohttp parses a byte.

- A request head must be complete within ``head_timeout`` of its first byte (of the accept, for a
  connection's first request): a head that trickles, or never starts, gets a 408 and is closed.
- A kept-alive connection with no request for ``idle_timeout`` is closed.
- At most ``max_connections`` are open at once, and at most ``max_connections_per_peer`` from one
  peer: the uid the kernel gives for the other end (SO_PEERCRED; the remote address over TCP). An
  excess connection gets its refusal (503, or 429 for the peer's cap) and is closed at once, so a
  flood of connections costs the agent a bounded amount of memory however long it lasts.

The peer is a uid, not a pid: the agent runs in its own pid namespace (no ``hostPID``), where the
pid of another pod's process reads as 0, and one pod may fork as many processes as it likes. Pods
that run as the same uid share that uid's cap; what is fair between pods is the per-pod request
rate (``ratelimit``), which needs the verified token and so comes later. A pod that runs as root
may take any uid, so at the node's cap a newcomer whose peer holds fewer connections than the peer
holding the most takes the place of that peer's oldest connection not in a request.

Deadlines are swept every ``SWEEP_EVERY`` seconds on the injected clock (the tests drive a
FakeClock): a timeout is late by at most that much.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import cast

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ..lite import aip193
from ..serving.peercred import peer_of
from . import refusals

SWEEP_EVERY = 1.0  # seconds between looks for connections past their deadline


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The agent's --head-timeout, --idle-timeout, --max-connections, --max-connections-per-peer."""

    head_timeout: float
    idle_timeout: float
    max_connections: int
    max_connections_per_peer: int


def _answer(refusal: refusals.Refusal, **fields: object) -> bytes:
    """A whole HTTP/1.1 answer in the agent's AIP-193 shape, that closes the connection."""
    body = aip193.encode(refusal.code, refusal.template.format(**fields), refusal.reason)
    phrase = HTTPStatus(refusal.status).phrase
    head = (
        f"HTTP/1.1 {refusal.status} {phrase}\r\nContent-Type: application/json\r\n"
        f"Cache-Control: no-store\r\nRetry-After: 1\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def peer_key(transport: asyncio.BaseTransport) -> str:
    """Who is at the other end, for the per-peer cap: ``uid N`` on the socket, the address over TCP."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            return f"uid {peer_of(sock).uid}"
        except OSError:
            return "uid unknown"
    peer = transport.get_extra_info("peername")
    return f"address {peer[0]}" if isinstance(peer, tuple) and peer else "address unknown"


class _Guard(asyncio.Protocol):
    """Stands in front of aiohttp's protocol for one connection: admits it or refuses it, and keeps
    the deadline of the state it is in (waiting for a head, answering, idle)."""

    __slots__ = ("_owner", "_server", "deadline", "inner", "peer", "transport", "waiting_for_head")

    def __init__(self, owner: Connections, server: web.Server) -> None:
        self._owner = owner
        self._server = server
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.deadline: float | None = None  # None while a request is being answered
        self.waiting_for_head = True

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base)  # uvloop's transports have its methods
        self.transport = transport
        self.peer = peer_key(transport)
        refusal = self._owner.admit(self)
        if refusal is not None:
            transport.write(refusal)
            transport.close()
            return
        inner = cast(asyncio.Protocol, self._server())
        self.inner = inner
        inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.inner is None:
            return  # a refused connection: its bytes are dropped as it closes
        if not self.waiting_for_head and self.deadline is not None:  # idle until now: a new head
            self.waiting_for_head = True
            self.deadline = self._owner.now() + self._owner.limits.head_timeout
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else False

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.release(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)


HEAD_TIMEOUT_ANSWER = _answer(refusals.HEAD_TIMEOUT)


class Connections:
    """The open connections of the agent's sites: their caps, their deadlines, their count."""

    def __init__(
        self,
        limits: ConnectionLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_refused: Callable[[str], None] = lambda reason: None,
        on_closed: Callable[[str], None] = lambda why: None,
    ) -> None:
        self.limits = limits
        self.now = clock
        self._sleep = sleep
        self._on_refused = on_refused
        self._on_closed = on_closed
        self._open: dict[asyncio.BaseTransport, _Guard] = {}
        self._per_peer: Counter[str] = Counter()
        self._full = _answer(refusals.TOO_MANY_CONNECTIONS, limit=limits.max_connections)

    def __len__(self) -> int:
        return len(self._open)

    def protocols(self, server: web.Server) -> Callable[[], asyncio.BaseProtocol]:
        """The protocol factory for ``servingsite.ServingSite``: each connection behind its guard."""
        return lambda: _Guard(self, server)

    def admit(self, guard: _Guard) -> bytes | None:
        """Count ``guard``'s connection in, or the answer that refuses it."""
        limits = self.limits
        if len(self._open) >= limits.max_connections and not self._make_room(guard.peer):
            self._on_refused(refusals.TOO_MANY_CONNECTIONS.reason)
            return self._full
        if self._per_peer[guard.peer] >= limits.max_connections_per_peer:
            crowded = refusals.TOO_MANY_CONNECTIONS_FROM_PEER
            self._on_refused(crowded.reason)
            return _answer(crowded, peer=guard.peer, limit=limits.max_connections_per_peer)
        assert guard.transport is not None
        self._open[guard.transport] = guard
        self._per_peer[guard.peer] += 1
        guard.deadline = self.now() + limits.head_timeout
        return None

    def _make_room(self, peer: str) -> bool:
        """At the node's cap: close the oldest connection not in a request of the peer holding the
        most, if that peer holds more than ``peer`` would with one more; whether room was made."""
        # A root pod may take any uid, so per-peer caps alone let it fill the node's; this way the
        # node's cap is shared out, and a peer that keeps few connections always gets one in.
        biggest, held = max(self._per_peer.items(), key=lambda item: item[1])
        if held <= self._per_peer[peer] + 1:
            return False
        for victim in self._open.values():  # oldest first
            if victim.peer == biggest and victim.deadline is not None:  # waiting for a head, or idle
                assert victim.transport is not None
                victim.transport.close()
                self.release(victim)
                self._on_refused(refusals.TOO_MANY_CONNECTIONS.reason)
                return True
        return False

    def release(self, guard: _Guard) -> None:
        if guard.transport is None or self._open.pop(guard.transport, None) is None:
            return
        left = self._per_peer[guard.peer] - 1
        if left > 0:
            self._per_peer[guard.peer] = left
        else:
            del self._per_peer[guard.peer]

    def middleware(self) -> Middleware:
        """Marks a connection as answering while its request is handled, and idle after."""

        @web.middleware
        async def answering(request: web.Request, handler: Handler) -> web.StreamResponse:
            guard = self._open.get(request.transport) if request.transport is not None else None
            if guard is not None:
                guard.deadline = None
                guard.waiting_for_head = False
            try:
                return await handler(request)
            finally:
                if guard is not None:
                    guard.deadline = self.now() + self.limits.idle_timeout

        return answering

    def sweep(self) -> int:
        """Close every connection past its deadline; how many."""
        now = self.now()
        late = [g for g in self._open.values() if g.deadline is not None and g.deadline <= now]
        for guard in late:
            assert guard.transport is not None
            if guard.waiting_for_head:
                guard.transport.write(HEAD_TIMEOUT_ANSWER)
                self._on_closed("head_timeout")
            else:
                self._on_closed("idle_timeout")
            guard.transport.close()
            self.release(guard)  # now: its slot is free although the close completes later
        return len(late)

    async def run(self) -> None:
        """Sweep until cancelled."""
        while True:
            await self._sleep(SWEEP_EVERY)
            self.sweep()
