"""Fixtures for the sidecar core: a fake token service on loopback and providers on a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tokenrelay.testing import FakeClock, FakeTokenService

from ..support.core import (
    Harness,
)


@pytest.fixture
async def harness(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> AsyncIterator[Harness]:
    clock = FakeClock()
    service = FakeTokenService(wall=clock.wall)
    server = await aiohttp_server(service.app())
    async with aiohttp.ClientSession() as session:
        yield Harness(service, server, clock, session)
