"""One TCP port for both protocols: a connection that opens with the HTTP/2 client preface is HTTP/2.

The real API serves gRPC "at the same host"; so does the emulator, on its one port, so that a client
(or tokenrelay's proxy) needs no second address. Every connection starts with a ``Sniffer`` that reads
up to the preface's 24 bytes, then hands the transport to aiohttp's own HTTP/1.1 protocol (the subclass in
``malformed``, which answers parse errors in the AIP-193 shape) or to the HTTP/2 protocol
(``h2server``), which serves gRPC and relays the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from aiohttp import web

from ...serving.site import Protocols
from ..malformed import http1_factory

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FIRST_BYTES_SECONDS = 30.0  # a connection that says nothing is closed, as aiohttp would


class Sniffer(asyncio.Protocol):
    """Stands in front of a connection until its first bytes tell HTTP/1.1 from HTTP/2."""

    def __init__(
        self, http1: Callable[[], asyncio.BaseProtocol], http2: Callable[[], asyncio.BaseProtocol]
    ) -> None:
        self._http1 = http1
        self._http2 = http2
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
        inner = self._http2() if self._seen.startswith(PREFACE) else self._http1()
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


def dual(http2: Callable[[], asyncio.BaseProtocol]) -> Protocols:
    """For a ServingSite: aiohttp's HTTP/1.1 (refusing malformed requests in the AIP-193 shape) and,
    after the preface, the HTTP/2 protocol ``http2``, on one port."""

    def protocols(server: web.Server) -> Callable[[], asyncio.BaseProtocol]:
        http1 = http1_factory(server)
        return lambda: Sniffer(http1, http2)

    return protocols
