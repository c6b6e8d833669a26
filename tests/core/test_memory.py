"""The idle sidecar hands freed heap pages back: glibc's malloc_trim, a moment after each exchange."""

from __future__ import annotations

import asyncio
import dataclasses
import platform
from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestServer

from tokenrelay.errors import TokenRelayError
from tokenrelay.sidecar import daemon, memory
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import FakeTokenService, make_jwt


async def test_one_release_after_exchanges_settle() -> None:
    """Exchanges close together (several audiences, a failure) lead to one malloc_trim(0), after them."""
    calls: list[int] = []

    def trim(pad: int) -> int:
        calls.append(pad)
        return 1

    trimmer = memory.Trimmer(trim, settle=0)
    trimmer.failed("a", TokenRelayError("down"), duration=0.1, consecutive=1)
    trimmer.failed("b", TokenRelayError("down"), duration=0.1, consecutive=1)
    assert calls == []
    for _ in range(3):
        await asyncio.sleep(0)
    assert calls == [0]
    assert not trimmer.pending


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_malloc_trim_is_found() -> None:
    """On glibc the lever is really there: the sidecar's Trimmer holds malloc_trim, and it runs."""
    trimmer = memory.Trimmer()
    assert trimmer.trim is not None
    memory.release_free_memory(trimmer.trim)


async def test_the_sidecar_schedules_a_release_after_its_exchange(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> None:
    """`tokenrelay run` hangs a Trimmer off its providers: its first exchange schedules a release;
    --once (which exits at once) has none."""
    server = await aiohttp_server(FakeTokenService().app())
    settings = Settings(
        auth_url=str(server.make_url("")).rstrip("/"),
        api_url="https://api.example",
        identity="org/ci",
        id_token_source="env",
        id_token_env="OIDC",
    )
    environ = {"OIDC": make_jwt({"sub": "ci", "exp": 4_000_000_000})}
    sidecar = daemon.build(settings, environ=environ)
    trimmer = sidecar.trimmer
    assert trimmer is not None
    try:
        before = trimmer.pending
        await sidecar.providers.get(settings.audiences[0])
        after_exchange = trimmer.pending
    finally:
        await sidecar.stop()
    assert (before, after_exchange, trimmer.pending) == (False, True, False)
    once = daemon.build(dataclasses.replace(settings, once=True), environ=environ)
    await once.session.close()
    assert once.trimmer is None
