"""A three-hour job on every platform, on a fake clock: 15-minute OIDC tokens, one-hour API tokens.

The relay is the daemon's own composition (``daemon.build``) with ``--id-token-source NAME`` in the
platform's environment, its endpoints played by an emulator running on the same fake wall clock, its
commands the emulator's stand-ins as real subprocesses. No call may fail; a source that mints does so
at every exchange; a CI variable (set once, for the job's length) is handed out as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.app import EmulatorServer
from tokenrelay.emulator.platforms.registry import PLATFORMS
from tokenrelay.testing import FakeClock
from tokenrelay.tokens.idsources import SOURCES

from ..support.chaos import RelayFactory
from ..support.platforms import environment, spiffe_socket, write_stand_ins

JOB = 3 * 3600.0
CHECK_EVERY = 600.0  # a client asks for a token every ten minutes of the job
API_TOKEN_LIFETIME = 3600.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def emulator(clock: FakeClock) -> AsyncIterator[Emulator]:
    emulator = Emulator(wall=clock.wall)  # platform tokens live 15 minutes (PLATFORM_LIFETIME) on it
    with spiffe_socket() as socket_path:
        async with EmulatorServer(emulator, grpc=False, spiffe_socket=socket_path):
            yield emulator


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_stand_ins(tmp_path_factory.mktemp("bin"))


@pytest.mark.parametrize("name", [name for name in SOURCES if name in PLATFORMS])
async def test_a_three_hour_job_never_fails_a_call(
    name: str, clock: FakeClock, emulator: Emulator, bin_dir: Path, relay_factory: RelayFactory
) -> None:
    """Every ten minutes of a three-hour job a client gets a token; minting sources minted one OIDC
    token per exchange, and a CI variable's token served every exchange."""
    env = environment(name, emulator, bin_dir, lifetime=JOB + 600.0)
    if name == "azure":
        env["GCE_METADATA_HOST"] = "127.0.0.1:9"
    relay = await relay_factory(
        clock=clock, environ=env, lifetime=API_TOKEN_LIFETIME, id_token_source=name, exchange_timeout=10.0
    )
    start = clock.now
    while clock.now < start + JOB:
        reply = await relay.get()
        assert reply.status == 200, (name, clock.now - start, reply.body)
        await relay.advance(CHECK_EVERY, step=60.0)
    assert relay.fetch.failed == []
    seen = relay.service.seen_id_tokens
    assert relay.service.calls == len(seen) >= 3  # one-hour tokens over three hours
    if SOURCES[name].mints:
        assert len(set(seen)) == len(seen)  # a fresh OIDC token at every exchange
        assert emulator.platforms.calls[name] == len(seen)
    else:
        assert len(set(seen)) == 1
