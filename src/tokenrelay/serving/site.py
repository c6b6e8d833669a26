"""An aiohttp site whose connections are served by a protocol of our own, in front of aiohttp's.

aiohttp's ``SockSite.start`` hands its ``web.Server`` (the factory of its HTTP/1.1 protocol) straight
to the loop. The sidecar's socket puts its peer check and its token shortcut in front of it
(``sidecar.localapi``), and the emulator its HTTP/2 sniffer and its AIP-193 parse errors
(``emulator.app``): each registers with the runner as ``SockSite`` does, then serves through
``protocols(server)``, the factory it builds around aiohttp's (``BaseSite.stop`` closes it as usual).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from aiohttp import web

# From aiohttp's web.Server (itself a protocol factory), the factory of the protocols to serve with.
Protocols = Callable[[web.Server], Callable[[], asyncio.BaseProtocol]]


class ServingSite(web.SockSite):
    """A SockSite serving ``protocols(server)``'s protocols on ``sock``."""

    def __init__(self, runner: web.BaseRunner, sock: socket.socket, protocols: Protocols) -> None:
        super().__init__(runner, sock)
        self._protocols = protocols

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._protocols(server), sock=self._sock, backlog=self._backlog
        )
