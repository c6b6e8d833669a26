"""The core suite's harness: providers on a FakeClock against a real FakeTokenService."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from aiohttp.test_utils import TestServer

from tokenrelay.testing import FakeClock, FakeTokenService
from tokenrelay.tokens import sts
from tokenrelay.tokens.provider import TokenProvider

API = "https://api.example.test"


@dataclass
class Harness:
    """A provider for API wired to a FakeTokenService through the real exchange code."""

    service: FakeTokenService
    server: TestServer
    clock: FakeClock
    session: aiohttp.ClientSession
    id_token: str = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ3b3JrbG9hZCJ9.oidc-signature"
    attempts: int = 0  # counted when the provider calls fetch, before any I/O

    @property
    def auth_url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    async def fetch(self, audience: str) -> sts.Issued:
        self.attempts += 1
        return await sts.exchange(self.session, self.auth_url, audience, "org/ci", self.id_token, timeout=2.0)

    def provider(
        self,
        audience: str = API,
        *,
        seed: int = 1,
        wait_timeout: float = 5.0,
        fetch: Callable[[str], Awaitable[sts.Issued]] | None = None,
    ) -> TokenProvider:
        return TokenProvider(
            audience,
            fetch or self.fetch,
            clock=self.clock,
            wall=self.clock.wall,
            sleep=self.clock.sleep,
            rng=random.Random(seed),
            wait_timeout=wait_timeout,
        )
