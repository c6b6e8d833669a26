"""The rapid-reset budget (CVE-2023-44487) of each client peer, across its HTTP/2 connections.

A client that opens streams and resets them makes the proxy open and reset streams at the upstream,
on the connections every client shares, each carrying the token. A budget per connection is no bound:
a client that reconnects in a loop gets a fresh one each time (21,655 upstream streams in 3 s). So the
budget is the peer's: its client address (a Unix socket's: the peer's uid), a bucket of
``Limits.h2_resets`` resets that refills at as many per second. Every stream the client resets, or
leaves open by going away, spends one; a connection that resets beyond the bucket gets GOAWAY
ENHANCE_YOUR_CALM, and a new connection of a peer whose bucket is empty is refused the same way until
it refills (at most a second). Clients behind one address share one bucket, and so does every
address one client may pick: all of loopback (any local process may connect from any of 127/8, or
::1), and an IPv6 /64 (a host is given one whole). So on loopback every local client of the proxy
shares one budget: one that resets at will can get another's connection calmed, but cannot buy a
fresh budget by connecting from another address.

At most ``PEERS_KEPT`` peers are remembered (a peer's count is a count a peer controls too): the
oldest goes first; a full bucket is forgotten at the sweep.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Callable
from typing import Any

PEERS_KEPT = 4096
_UCRED = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


def peer_of(transport: Any) -> str:
    """The budget's key for a client connection: its address, or for a Unix socket the peer's uid."""
    peername = transport.get_extra_info("peername")
    if isinstance(peername, tuple) and peername:
        return _address_key(str(peername[0]))
    sock = transport.get_extra_info("socket")
    if sock is not None and getattr(sock, "family", None) == socket.AF_UNIX:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        except OSError:
            return "unix"
        return f"uid:{_UCRED.unpack(raw)[1]}"
    return "unknown"


def _address_key(host: str) -> str:
    """One key for the addresses one client may choose between: loopback, an IPv6 /64."""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "loopback"
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class ResetBudget:
    """Resets each peer may still make: ``burst`` at most, refilled at ``rate`` per second."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._spent: dict[str, tuple[float, float]] = {}  # peer: (resets not yet refilled, as of when)

    def spend(self, peer: str, count: int = 1) -> bool:
        """``count`` resets by ``peer``; False once they go beyond its budget."""
        spent = self._owed(peer) + count
        self._spent.pop(peer, None)
        self._spent[peer] = (spent, self.clock())
        if len(self._spent) > PEERS_KEPT:
            del self._spent[next(iter(self._spent))]
        return spent <= self.burst

    def exhausted(self, peer: str) -> bool:
        """Whether ``peer`` has spent its budget: a new connection of its is refused."""
        return self._owed(peer) >= self.burst

    def sweep(self) -> None:
        """Forget the peers whose bucket is full again."""
        for peer in [peer for peer in self._spent if not self._owed(peer)]:
            del self._spent[peer]

    def _owed(self, peer: str) -> float:
        known = self._spent.get(peer)
        if known is None:
            return 0.0
        spent, at = known
        return max(0.0, spent - (self.clock() - at) * self.rate)
