"""The proxy suite's pieces: an upstream that echoes what it received, scripted token providers,
and raw HTTP helpers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from tokenrelay.errors import ExchangeError
from tokenrelay.proxy import ProxyServer
from tokenrelay.testing import jti, make_jwt
from tokenrelay.tokens.provider import TokenProvider, TokenProviders
from tokenrelay.tokens.sts import Issued

ServerFactory = Callable[..., Awaitable[TestServer]]


@dataclass
class Tokens:
    """Real token providers over a scripted exchange that issues t1, t2, … (their jti)."""

    audience: str = ""
    fetches: int = 0
    fail: bool = False
    providers: TokenProviders | None = None

    async def fetch(self, audience: str) -> Issued:
        self.fetches += 1
        await asyncio.sleep(0)
        if self.fail:
            raise ExchangeError("token service says no (scripted)")
        now = time.time()
        claims = {"jti": f"t{self.fetches}", "aud": audience, "iat": int(now), "exp": int(now) + 3600}
        return Issued(make_jwt(claims))

    def build(self, audience: str) -> TokenProviders:
        self.audience = audience
        self.providers = TokenProviders([TokenProvider(audience, self.fetch, wait_timeout=5.0)])
        return self.providers


@dataclass
class Echo:
    """An upstream that answers every request with what it saw, as JSON."""

    seen: list[dict[str, Any]] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)  # token jtis answered with 401
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024**3)
        app.router.add_get("/base/ws", self.websocket)
        app.router.add_get("/base/download", self.download)
        app.router.add_post("/base/upload", self.upload)
        app.router.add_route("*", "/base/slow", self.slow)
        app.router.add_route("*", "/{tail:.*}", self.echo)
        return app

    def record(self, request: web.Request, body: bytes = b"") -> dict[str, Any]:
        auth = request.headers.get("Authorization", "")
        seen = {
            "method": request.method,
            "path": request.raw_path,
            "headers": [[k, v] for k, v in request.headers.items() if k != "Authorization"],
            "token": jti(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ey") else auth,
            "body": body.decode("latin-1"),
        }
        self.seen.append(seen)
        return seen

    async def echo(self, request: web.Request) -> web.StreamResponse:
        seen = self.record(request, await request.read())
        if seen["token"] in self.revoked:
            return web.json_response({"code": 16, "message": "token revoked"}, status=401)
        if request.path == "/base/status/204":
            return web.Response(status=204)
        if request.path == "/base/redirect":
            raise web.HTTPFound("https://elsewhere.example/")
        return web.json_response(seen, headers={"Connection": "keep-alive", "X-Upstream": "yes"})

    async def slow(self, request: web.Request) -> web.StreamResponse:
        self.record(request)
        await self.gate.wait()
        return web.json_response({"slow": "done"})

    async def upload(self, request: web.Request) -> web.StreamResponse:
        digest = hashlib.sha256()
        size = 0
        async for chunk in request.content.iter_any():
            digest.update(chunk)
            size += len(chunk)
        return web.json_response({"size": size, "sha256": digest.hexdigest()})

    async def download(self, request: web.Request) -> web.StreamResponse:
        size = int(request.query["size"])
        response = web.StreamResponse()
        response.content_length = size
        await response.prepare(request)
        block = bytes(range(256)) * 1024
        sent = 0
        while sent < size:
            piece = block[: min(len(block), size - sent)]
            await response.write(piece)
            sent += len(piece)
        await response.write_eof()
        return response

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        seen = self.record(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(f"hello {seen['token']}")
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await ws.send_str("echo " + message.data)
        return ws


@dataclass
class Observed:
    """A ProxyObserver that remembers."""

    codes: list[int] = field(default_factory=list)
    retries: int = 0
    grpc_statuses: list[int | None] = field(default_factory=list)

    def request(self, code: int, duration: float) -> None:
        self.codes.append(code)

    def retry(self) -> None:
        self.retries += 1

    def stream(self, code: int, grpc_status: int | None, duration: float) -> None:
        self.codes.append(code)
        self.grpc_statuses.append(grpc_status)


@dataclass
class Proxied:
    echo: Echo
    tokens: Tokens
    proxy: ProxyServer
    observed: Observed

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"


StartProxy = Callable[..., Awaitable[ProxyServer]]
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def raw(port: int, data: bytes, *, read_all: bool = True) -> bytes:
    """Send ``data`` on a fresh connection; what comes back until the proxy closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(-1) if read_all else reader.read(65536), 10)
    finally:
        writer.close()


def body_of(response: bytes) -> dict[str, Any]:
    """The JSON body of a raw response that ends the connection."""
    parsed: dict[str, Any] = json.loads(response.split(b"\r\n\r\n", 1)[1])
    return parsed
