"""The platform's OIDC token file misbehaves: missing, empty, expired, rotated, replaced by a directory."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ..support.chaos import Relay, RelayFactory

LIFETIME = 600.0


def remove(relay: Relay) -> None:
    relay.id_token_file.unlink()


def empty(relay: Relay) -> None:
    relay.id_token_file.write_text("\n")


def expired(relay: Relay) -> None:
    relay.id_token_file.write_text(relay.id_token(lifetime=-60.0))


def directory(relay: Relay) -> None:
    relay.id_token_file.unlink()
    relay.id_token_file.mkdir()


CASES: dict[str, tuple[Callable[[Relay], None], str]] = {
    "missing": (remove, "no OIDC token file at"),
    "empty": (empty, "is empty"),
    "expired": (expired, "kubelet renews a projected token at 80% of its life"),
    "directory": (directory, "is a directory, not a file"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_broken_token_file_is_refused_locally_and_reported(relay: Relay, case: str) -> None:
    """A broken OIDC token file never reaches the token service; the old token is served, /readyz names
    the file's problem before expiry, and a good file brings refreshes back."""
    breaks, words = CASES[case]
    first = (await relay.get()).id
    calls = relay.service.calls
    breaks(relay)
    await relay.advance_to(1000.0 + LIFETIME - 50.0, step=10.0)
    assert relay.service.calls == calls  # nothing was sent with a bad token
    assert relay.fetch.failed
    reply = await relay.get()
    assert (reply.status, reply.id) == (200, first)
    ready = await relay.get("/readyz")
    assert ready.status == 503
    assert words in ready.body["message"]
    if relay.id_token_file.is_dir():
        shutil.rmtree(relay.id_token_file)
    fresh = relay.id_token()
    relay.write_id_token(fresh)
    await relay.advance(30.0)
    assert (await relay.get()).id != first
    assert relay.service.seen_id_tokens[-1] == fresh


def kubelet_write(volume: Path, value: str, stamp: str) -> None:
    """Write a projected token the way kubelet's AtomicWriter does: a timestamped directory, a
    ``..data`` symlink swapped by rename, and ``token`` -> ``..data/token``."""
    target = volume / f"..{stamp}"
    target.mkdir()
    (target / "token").write_text(value)
    staging = volume / "..data_tmp"
    staging.symlink_to(target.name)
    staging.rename(volume / "..data")
    link = volume / "token"
    if not link.is_symlink():
        link.symlink_to("..data/token")


async def test_kubelet_rotation_is_picked_up_at_the_next_exchange(relay_factory: RelayFactory) -> None:
    """When kubelet swaps the ..data symlink mid-run, the next exchange carries the new OIDC token and
    the old one is never sent again."""
    relay = await relay_factory(start=False)
    volume = relay.id_token_file.parent / "volume"
    volume.mkdir()
    old = relay.id_token(sub="old")
    kubelet_write(volume, old, "2024_01_01_00_00_00.1")
    relay.id_token_file.unlink()
    relay.id_token_file.symlink_to(volume / "token")
    relay.providers.start()
    try:
        await relay.settle()
        assert relay.service.seen_id_tokens == [old]
        new = relay.id_token(sub="new")
        kubelet_write(volume, new, "2024_01_01_00_48_00.2")
        await relay.advance_to(1000.0 + LIFETIME * 0.6, step=10.0)
        assert relay.service.seen_id_tokens == [old, new]
    finally:
        await relay.providers.stop()
