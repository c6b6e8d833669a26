"""An emulator on its own event loop, driven synchronously: hypothesis tests call it example by example."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from yarl import URL

from tokenrelay.emulator import Emulator, EmulatorServer


class SyncEmulator:
    """A running emulator and an HTTP session, both on a private loop; ``request`` blocks."""

    def __init__(self, emulator: Emulator) -> None:
        self.loop = asyncio.new_event_loop()
        self.emulator = emulator
        self.server = EmulatorServer(emulator)
        self.loop.run_until_complete(self.server.start())
        self.http = self.loop.run_until_complete(self._session())

    @staticmethod
    async def _session() -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    @property
    def url(self) -> str:
        return self.server.url

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        params: dict[str, str] | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        """``(status, body, headers)``; ``path`` is sent as given (already percent-encoded)."""
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"

        async def send() -> tuple[int, bytes, dict[str, str]]:
            url = URL(self.url + path, encoded=True)
            async with self.http.request(
                method, url, params=params, data=data, headers=all_headers, allow_redirects=False
            ) as response:
                return response.status, await response.read(), dict(response.headers)

        return self.loop.run_until_complete(send())

    def json(self, method: str, path: str, token: str, **kwargs: Any) -> tuple[int, Any]:
        status, body, _ = self.request(method, path, token=token, **kwargs)
        import json

        return status, json.loads(body) if body else None

    def close(self) -> None:
        self.loop.run_until_complete(self.http.close())
        self.loop.run_until_complete(self.server.stop())
        self.loop.close()
