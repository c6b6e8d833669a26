"""Shared set-up for the emulator's tests: a running emulator with a wall clock the test can move,
an organization with one identity per role, and a small HTTP helper."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import grpc
import pytest

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.testing import FakeClock

from ..support.emulator import World
from .grpc_client import Client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def server(clock: FakeClock) -> AsyncIterator[EmulatorServer]:
    async with EmulatorServer(Emulator(wall=clock.wall)) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def client(world: World) -> AsyncIterator[Client]:
    """grpcio on the emulator's port (the same port as its HTTP API)."""
    async with grpc.aio.insecure_channel(world.url.removeprefix("http://")) as channel:
        yield Client(channel)


@pytest.fixture
def world(server: EmulatorServer, clock: FakeClock, http: aiohttp.ClientSession) -> World:
    emulator = server.emulator
    org = emulator.organization("acme")
    other = emulator.organization("elsewhere")
    tokens, uids = {}, {}
    for role in ("viewer", "editor", "owner"):
        identity = emulator.workload(org.uid, subject=f"sub-{role}", role=role, name=role).identity
        uids[role] = identity.uid
        tokens[role] = emulator.api_token(identity.uid)
    outsider = emulator.workload(other.uid, subject="sub-outsider", role="owner").identity
    uids["outsider"] = outsider.uid
    tokens["outsider"] = emulator.api_token(outsider.uid)
    return World(emulator, server.url, clock, http, org, tokens, uids)
