"""Test doubles for code built on tokenrelay (and for tokenrelay's own tests and benchmarks).

``FakeClock`` drives a TokenProvider's schedule deterministically: pass ``clock=fake``,
``wall=fake.wall`` and ``sleep=fake.sleep``, then ``tick()``. ``FakeTokenService`` is a real aiohttp
application speaking the token exchange, issuing JWTs ``t1``, ``t2``, … (their ``jti``), counting
calls, and failing, hanging or answering garbage on demand; ``ThreadedServer`` serves any aiohttp
application on loopback from a thread of its own, for blocking clients. ``StaticTokenSource`` is a TokenSource
that always holds one long-lived token, for putting the local API or the proxy in front of it.
``loopback_certificates`` writes a throwaway CA and a certificate it signed for 127.0.0.1, for
serving https (or h2 over TLS) on loopback to a client told to trust that CA.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UnknownAudience
from .lite import aip193
from .tokens.token import Token

if TYPE_CHECKING:
    from aiohttp import web


class FakeClock:
    """A monotonic clock that moves only when told, with a matching wall clock and sleep."""

    def __init__(self, start: float = 1000.0, wall_start: float | None = None) -> None:
        self.now = start
        self.wall_offset = (time.time() if wall_start is None else wall_start) - start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self.wall_offset

    def jump_wall(self, seconds: float) -> None:
        """Move only the wall clock (NTP step, VM resume): the monotonic clock does not see it."""
        self.wall_offset += seconds

    @property
    def sleeping(self) -> int:
        """How many sleep() calls are waiting: lets a test wait until every background loop is idle."""
        return sum(1 for _, future in self._sleepers if not future.done())

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.now + seconds, future))
        await future

    def tick(self, seconds: float) -> None:
        """Advance time and wake every sleeper whose time has come."""
        self.now += seconds
        due = [(t, f) for t, f in self._sleepers if t <= self.now]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self.now]
        for _, future in due:
            if not future.done():
                future.set_result(None)

    async def settle(
        self, sleepers: int, *, busy: Callable[[], bool] = lambda: False, timeout: float = 10.0
    ) -> None:
        """Let the event loop run (real time, bounded by ``timeout``) until at least ``sleepers``
        sleep() calls wait on this clock and ``busy()`` is False: every background loop (a provider's
        schedule, say) has done what the last tick woke it for and is parked again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet = 0
        while quiet < 2:  # twice in a row: a wake-up may be queued behind the first look
            quiet = quiet + 1 if self.sleeping >= sleepers and not busy() else 0
            if loop.time() > deadline:
                raise AssertionError(f"the fake clock's sleepers did not settle within {timeout:g}s")
            await asyncio.sleep(0.001)

    async def advance(self, seconds: float, step: float = 1.0) -> None:
        """tick() in steps, letting the event loop run between them."""
        remaining = seconds
        while remaining > 0:
            delta = min(step, remaining)
            self.tick(delta)
            remaining -= delta
            for _ in range(5):
                await asyncio.sleep(0)


class StaticTokenSource:
    """A TokenSource that always holds one long-lived token for one audience, and is always ready."""

    def __init__(self, audience: str = "https://api.example", value: str | None = None) -> None:
        self.audience = audience
        self.token = Token(
            value=value or make_jwt({"jti": "static", "aud": audience, "exp": 4_000_000_000}),
            audience=audience,
            received_at=0.0,
            lifetime=1e9,
            refresh_at=1e9,
            expire_wall=4_000_000_000.0,
        )
        self.rejected = 0  # how many times ``reject`` was called

    @property
    def audiences(self) -> tuple[str, ...]:
        return (self.audience,)

    def current(self, audience: str) -> Token | None:
        return self.token if audience == self.audience else None

    async def get(self, audience: str) -> Token:
        if audience != self.audience:
            raise UnknownAudience(f"audience {audience!r} is not configured")
        return self.token

    async def reject(self, audience: str, token: Token) -> Token:
        self.rejected += 1
        return await self.get(audience)

    def ready(self) -> str | None:
        return None


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def make_jwt(claims: dict[str, Any]) -> str:
    """An unsigned-looking JWT (header, claims, dummy signature): enough for a client."""
    return f"{_b64({'alg': 'ES256', 'typ': 'JWT'})}.{_b64(claims)}.c2lnbmF0dXJl"


# aiohttp is imported where it is used: StaticTokenSource and FakeClock need none of it.
Behaviour = Callable[["web.Request"], Awaitable["web.StreamResponse | None"]]


@dataclass
class FakeTokenService:
    """A token service on a real aiohttp server; set ``behaviour`` to script failures."""

    lifetime: float = 3600.0
    wall: Callable[[], float] = time.time
    calls: int = 0
    issued: list[str] = field(default_factory=list, repr=False)
    seen_id_tokens: list[str] = field(default_factory=list, repr=False)
    seen_queries: list[dict[str, str]] = field(default_factory=list)
    # Called before answering; a response it returns is sent instead of a token.
    behaviour: Behaviour | None = field(default=None, repr=False)
    gate: asyncio.Event | None = field(default=None, repr=False)  # answers wait for it when set

    def app(self) -> web.Application:
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/sts/exchange", self._exchange)
        return app

    async def _exchange(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        self.seen_queries.append(dict(request.query))
        auth = request.headers.get("Authorization", "")
        self.seen_id_tokens.append(auth.removeprefix("Bearer "))
        if self.gate is not None:
            await self.gate.wait()
        if self.behaviour is not None:
            response = await self.behaviour(request)
            if response is not None:
                return response
        if not auth.startswith("Bearer ") or "aud" not in request.query:
            return refusal(aip193.Code.INVALID_ARGUMENT, "missing bearer token or aud", 400)
        from aiohttp import web

        return web.json_response({"token": self.mint(request.query["aud"])})

    def mint(self, audience: str, lifetime: float | None = None, iat: float | None = None) -> str:
        now = self.wall() if iat is None else iat
        jti = f"t{len(self.issued) + 1}"
        token = make_jwt(
            {
                "jti": jti,
                "aud": audience,
                "sub": "test",
                "iat": int(now),
                "exp": int(now + (lifetime or self.lifetime)),
            }
        )
        self.issued.append(token)
        return token


def refusal(code: aip193.Code, message: str, status: int, reason: str = "TEST") -> web.Response:
    """An AIP-193 error answer like the upstream's."""
    from aiohttp import web

    return web.Response(
        status=status,
        body=aip193.encode(code, message, reason, "sts.example"),
        content_type="application/json",
    )


def jti(token: str) -> str:
    """The ``jti`` of a token minted by FakeTokenService: ``t1``, ``t2``, …"""
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["jti"])


class ThreadedServer:
    """An aiohttp application on 127.0.0.1 in a thread of its own, with its own event loop: for
    driving blocking clients (subprocesses, the credential helpers) against a loopback server."""

    def __init__(self, app: web.Application, ssl_context: ssl.SSLContext | None = None) -> None:
        self._app = app
        self._ssl = ssl_context  # https when given
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        from aiohttp import web

        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ssl)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def start(self) -> ThreadedServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("loopback server did not start")
        return self

    def stop(self) -> None:
        async def cleanup() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self._ssl else 'http'}://{self.netloc}"


@dataclass(frozen=True, slots=True)
class LoopbackCertificates:
    """PEM files: a throwaway CA (``ca``, what ``--upstream-ca`` or ``SSL_CERT_FILE`` would name) and
    a certificate for 127.0.0.1 that it signed, with its key (``cert``, ``key``)."""

    ca: str
    cert: str
    key: str

    def server_context(self, alpn: list[str] | None = None) -> ssl.SSLContext:
        """A server context presenting the certificate, offering ``alpn`` when given."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        if alpn:
            context.set_alpn_protocols(alpn)
        return context


def loopback_certificates(directory: str | Path) -> LoopbackCertificates:
    """Write ``ca.pem``, ``cert.pem`` and ``key.pem`` into ``directory``: a fresh CA and a certificate
    for the IP address 127.0.0.1 that it signed, both valid from five minutes ago for a day."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tokenrelay test CA")])

    def signed(subject: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    ca = (
        signed(ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = (
        signed(leaf_name, key.public_key())
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder = Path(directory)
    paths = LoopbackCertificates(str(folder / "ca.pem"), str(folder / "cert.pem"), str(folder / "key.pem"))
    Path(paths.ca).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    Path(paths.cert).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    Path(paths.key).write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths
