"""The rapid-reset budget of each client peer (proxy/http2/resets.py), on an injected clock."""

from __future__ import annotations

import os
import socket
from typing import Any

from tokenrelay.proxy.http2.resets import PEERS_KEPT, ResetBudget, peer_of
from tokenrelay.testing import FakeClock


class Transport:
    """What peer_of reads of an asyncio transport."""

    def __init__(self, **extra: Any) -> None:
        self.extra = extra

    def get_extra_info(self, name: str) -> Any:
        return self.extra.get(name)


def test_a_peers_budget_refills_at_its_rate() -> None:
    """A peer may reset ``burst`` streams at once, then as many a second as the rate refills; another
    peer's budget is its own."""
    clock = FakeClock()
    budget = ResetBudget(10, 10, clock)
    assert all(budget.spend("10.0.0.1") for _ in range(10))
    assert budget.exhausted("10.0.0.1")
    assert not budget.spend("10.0.0.1")
    assert not budget.exhausted("10.0.0.2") and budget.spend("10.0.0.2")
    clock.tick(0.6)  # 6 refilled, one of them owed by the refused reset
    assert not budget.exhausted("10.0.0.1")
    assert all(budget.spend("10.0.0.1") for _ in range(5))
    assert not budget.spend("10.0.0.1")
    clock.tick(10.0)
    budget.sweep()
    assert not budget._spent  # full buckets are forgotten


def test_the_peers_remembered_are_bounded() -> None:
    """Each new address is a count a peer controls: beyond PEERS_KEPT, the oldest is forgotten."""
    budget = ResetBudget(1, 1, FakeClock())
    for n in range(PEERS_KEPT + 10):
        budget.spend(f"peer{n}")
    assert len(budget._spent) == PEERS_KEPT
    assert not budget.exhausted("peer0") and budget.exhausted(f"peer{PEERS_KEPT + 9}")


def test_peers_are_their_address_or_their_uid() -> None:
    """A TCP client is its address, whatever its port (all of loopback one peer, an IPv6 /64 one);
    a Unix socket's client is its uid."""
    assert peer_of(Transport(peername=("10.1.2.3", 40000))) == "10.1.2.3"
    assert peer_of(Transport(peername=("::ffff:10.1.2.3", 1, 0, 0))) == "10.1.2.3"
    loopback = {("127.0.0.1", 40000), ("127.3.2.1", 1), ("::1", 1, 0, 0), ("::ffff:127.0.0.2", 1, 0, 0)}
    assert {peer_of(Transport(peername=name)) for name in loopback} == {"loopback"}
    one_host = {("2001:db8::1", 1, 0, 0), ("2001:db8::ffff:2", 1, 0, 0)}
    assert {peer_of(Transport(peername=name)) for name in one_host} == {"2001:db8::/64"}
    assert peer_of(Transport(peername=("2001:db8:0:1::1", 1, 0, 0))) == "2001:db8:0:1::/64"
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    with ours, theirs:
        assert peer_of(Transport(peername="", socket=ours)) == f"uid:{os.getuid()}"
