"""Who is at the other end of the local API's socket, and whether they may use it.

``--socket-allow-uid`` / ``--socket-allow-gid`` narrow the socket's file mode to named users and
groups. The kernel tells us the peer's credentials as they were at ``connect()`` (SO_PEERCRED: pid,
uid, gid; SO_PEERGROUPS: the supplementary groups), so the check needs no trust in anything the
client sends: a refused peer gets its 403 as soon as the connection is accepted, before one byte
of its request is parsed. Its bytes are drained unparsed (bounded) so that the kernel delivers the
403 rather than a reset.

The rule: with neither list set, everyone who can open the socket is served. Otherwise a peer is
served when its uid is in the uid list, or its gid or any of its supplementary groups is in the
gid list. Nobody is exempt, root included: root can read the token by other means anyway, and an
exemption would be one more thing to get wrong.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ..lite import aip193
from ..lite.aip193 import Code
from ..lite.names import where

log = logging.getLogger("tokenrelay.peercred")

_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux >= 4.13; Python does not name it
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_GID = struct.Struct("I")
# A refused client may keep sending; we read and drop at most this much, for at most this long.
DRAIN_BYTES = 64 * 1024
DRAIN_SECONDS = 2.0
# One warning per refused uid per this many seconds: a hostile local client must not flood the logs.
LOG_EVERY = 60.0


@dataclass(frozen=True, slots=True)
class Peer:
    """The credentials of a connected client, as the kernel recorded them at connect()."""

    pid: int  # 0 when the peer is in a pid namespace we cannot see
    uid: int
    gid: int


@dataclass(frozen=True, slots=True)
class Policy:
    """Which peers may use the socket."""

    uids: tuple[int, ...] = ()
    gids: tuple[int, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.uids or self.gids)

    def admits(self, peer: Peer, groups: Callable[[], tuple[int, ...]]) -> bool:
        """True when ``peer`` may be served; ``groups`` (its supplementary gids) is asked only if needed."""
        if not self.active or peer.uid in self.uids:
            return True
        if not self.gids:
            return False
        return peer.gid in self.gids or any(gid in self.gids for gid in groups())


def peer_of(sock: socket.socket) -> Peer:
    """SO_PEERCRED of a connected Unix socket; raises OSError."""
    pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return Peer(pid, uid, gid)


def supplementary_groups(sock: socket.socket, pid: int) -> tuple[int, ...]:
    """The peer's supplementary groups: SO_PEERGROUPS, else ``/proc/<pid>/status`` (racy: a pid can be
    reused), else none. Failing closed: an unknown group list admits nobody by group."""
    for size in (4 * 64, 4 * 65536):  # NGROUPS_MAX is 65536
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, size)
        except OSError as exc:
            if exc.errno == errno.ERANGE:
                continue
            break  # ENOPROTOOPT: an older kernel
        return tuple(gid for (gid,) in _GID.iter_unpack(raw[: len(raw) - len(raw) % _GID.size]))
    return _proc_groups(pid)


def _proc_groups(pid: int) -> tuple[int, ...]:
    if pid <= 0:
        return ()
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ()
    for line in status.splitlines():
        if line.startswith("Groups:"):
            return tuple(int(item) for item in line.split()[1:] if item.isdigit())
    return ()


def _refusal_bytes() -> bytes:
    body = aip193.encode(
        Code.PERMISSION_DENIED,
        "this user may not use the tokenrelay socket: its uid and groups are not in "
        f"{where('socket_allow_uid')} or {where('socket_allow_gid')}",
        "PEER_NOT_ALLOWED",
    )
    head = (
        "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


REFUSAL = _refusal_bytes()


class RefusalLog:
    """Warns about refused peers, at most once per uid per LOG_EVERY seconds, with a count."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: dict[int, float] = {}
        self._suppressed: dict[int, int] = {}

    def refused(self, peer: Peer | None) -> None:
        uid = -1 if peer is None else peer.uid
        now = self._clock()
        last = self._last.get(uid)
        if last is not None and now - last < LOG_EVERY:
            self._suppressed[uid] = self._suppressed.get(uid, 0) + 1
            return
        self._last[uid] = now
        log.warning(
            "refused a socket client",
            extra={
                "peerUid": None if peer is None else peer.uid,
                "peerGid": None if peer is None else peer.gid,
                "peerPid": None if peer is None else peer.pid,
                "refusedSinceLastWarning": self._suppressed.pop(uid, 0),
            },
        )


class PeerGate(asyncio.Protocol):
    """Stands in front of the HTTP protocol for one connection until the peer is known to be allowed.

    Allowed: the real protocol takes the transport over (``set_protocol``) before any data arrives.
    Refused: the 403 is written, our side is shut for writing, and the peer's bytes are dropped.
    """

    def __init__(
        self, inner: Callable[[], asyncio.BaseProtocol], policy: Policy, refusals: RefusalLog
    ) -> None:
        self._inner = inner
        self._policy = policy
        self._refusals = refusals
        self._transport: asyncio.Transport | None = None
        self._drained = 0
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods
        transport = cast(asyncio.Transport, base)
        sock = transport.get_extra_info("socket")
        peer: Peer | None = None
        try:
            peer = peer_of(sock)
            admitted = self._policy.admits(peer, lambda: supplementary_groups(sock, peer.pid if peer else 0))
        except OSError:
            admitted = False  # no credentials, no service
        if admitted:
            inner = self._inner()
            transport.set_protocol(inner)
            inner.connection_made(transport)
            return
        self._refusals.refused(peer)
        self._transport = transport
        transport.write(REFUSAL)
        if transport.can_write_eof():
            transport.write_eof()
        self._timer = asyncio.get_running_loop().call_later(DRAIN_SECONDS, transport.close)

    def data_received(self, data: bytes) -> None:
        self._drained += len(data)
        if self._drained > DRAIN_BYTES and self._transport is not None:
            self._transport.close()

    def eof_received(self) -> bool:
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
