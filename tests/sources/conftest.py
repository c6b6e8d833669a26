"""An emulator playing every platform, an HTTP session, and the stand-in commands on a PATH."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.app import EmulatorServer
from tokenrelay.emulator.platforms.base import ORG_UUID

from ..support.platforms import spiffe_socket, write_stand_ins


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    # Azure Pipelines' and CircleCI's variable tokens carry audiences of their own choosing
    emulator = Emulator(api_audiences=("api://AzureADTokenExchange", ORG_UUID))
    with spiffe_socket() as socket_path:
        async with EmulatorServer(emulator, grpc=False, spiffe_socket=socket_path):
            yield emulator


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_stand_ins(tmp_path_factory.mktemp("bin"))


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose listener accepts connections (the kernel's backlog) and never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as listener:
        yield listener.getsockname()[1]
