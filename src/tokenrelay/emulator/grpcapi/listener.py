"""One TCP port for both protocols: a connection that opens with the HTTP/2 client preface is gRPC.

The real API serves gRPC "at the same host"; so does the emulator, on its one port, so that a client
(or tokenrelay's proxy) needs no second address. Every connection starts with a ``Sniffer`` that reads
up to the preface's 24 bytes: HTTP/1.1 hands the transport to aiohttp's own protocol, exactly as a
plain site would; the preface splices the connection to the gRPC server on its private Unix socket.
grpcio has no way to adopt an accepted socket, hence the splice; its cost is a copy per chunk, on
loopback, in an emulator.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import cast

from aiohttp import web

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FIRST_BYTES_SECONDS = 30.0  # a connection that says nothing is closed, as aiohttp would


class Sniffer(asyncio.Protocol):
    """Stands in front of a connection until its first bytes tell HTTP/1.1 from HTTP/2."""

    def __init__(self, http1: Callable[[], asyncio.BaseProtocol], grpc_path: str) -> None:
        self._http1 = http1
        self._grpc_path = grpc_path
        self._transport: asyncio.Transport | None = None
        self._seen = b""
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._timer = asyncio.get_running_loop().call_later(FIRST_BYTES_SECONDS, self._transport.close)

    def data_received(self, data: bytes) -> None:
        self._seen += data
        if PREFACE.startswith(self._seen):
            return  # still possibly the preface: wait for more
        self._cancel_timer()
        transport = self._transport
        assert transport is not None
        if self._seen.startswith(PREFACE):
            transport.pause_reading()
            asyncio.get_running_loop().create_task(self._splice(transport, self._seen))
        else:
            inner = self._http1()
            transport.set_protocol(inner)
            inner.connection_made(transport)
            cast(asyncio.Protocol, inner).data_received(self._seen)
        self._seen = b""

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _splice(self, client: asyncio.Transport, first: bytes) -> None:
        loop = asyncio.get_running_loop()
        try:
            backend, _ = await loop.create_unix_connection(lambda: Pipe(client), self._grpc_path)
        except OSError:
            client.close()
            return
        if client.is_closing():
            backend.close()
            return
        front = Pipe(backend)
        client.set_protocol(front)
        backend.write(first)
        client.resume_reading()


class Pipe(asyncio.Protocol):
    """One direction's reader of a splice: what it reads goes to ``peer``; back-pressure both ways."""

    def __init__(self, peer: asyncio.Transport | None) -> None:
        self.peer = peer
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer.write(data)

    def eof_received(self) -> bool:
        if self.peer is not None and self.peer.can_write_eof():
            self.peer.write_eof()
            return True  # keep our side open for the peer's answer
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.peer.close()

    # our transport's buffer is full: stop reading from the peer until it drains
    def pause_writing(self) -> None:
        if self.peer is not None:
            self.peer.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None:
            self.peer.resume_reading()


class DualSockSite(web.SockSite):
    """A SockSite serving aiohttp's HTTP/1.1 and, after the preface, the gRPC server at ``grpc_path``."""

    def __init__(self, runner: web.BaseRunner, sock: socket.socket, grpc_path: str) -> None:
        super().__init__(runner, sock)
        self._grpc_path = grpc_path

    async def start(self) -> None:
        # as GuardedSockSite does: register with the runner, then serve through our own protocol
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            lambda: Sniffer(server, self._grpc_path), sock=self._sock, backlog=self._backlog
        )
