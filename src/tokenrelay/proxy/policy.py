"""The request policy both front ends share, beyond methods.py, headers.py and refusals.py.

``acquire``: the slow path, when the token is not held or no upstream connection is idle. It waits
for a token, or heals a refused one (single-flight, bounded by ``Bearer.may_reject``), then for a
connection; a failure becomes the refusal the client gets (503, 504 or 502).

``Replay``: up to ``Limits.replay_bytes`` of a request body, kept so that the request can be sent again
once: with a refreshed token after a 401 (or a trailers-only gRPC UNAUTHENTICATED), or on another
connection when the upstream closed or refused it unprocessed.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import TokenUnavailable
from ..tokens.token import Token
from . import refusals
from .bearer import Bearer, Held
from .refusals import Refusal
from .target import Target

log = logging.getLogger("tokenrelay.proxy")

Conn = TypeVar("Conn")


async def acquire(
    bearer: Bearer,
    upstream: Target,
    timeout: float,
    *,
    held: Held | None,
    rejected: Token | None,
    take: Callable[[], Conn | None] | None,
    connect: Callable[[], Awaitable[Conn]],
    protocol: str,
) -> tuple[Held, Conn] | Refusal:
    """The token (a fresh one when ``rejected`` got a 401) and an upstream connection, or why not.

    ``held``: the token already held; ``take``: an idle connection, if any (None: always a new one).
    """
    extra = {"protocol": protocol}
    try:
        if rejected is not None:
            held = await bearer.reject(rejected)
        elif held is None:
            held = await bearer.get()
        conn = take() if take is not None else None
        if conn is None:
            conn = await connect()
    except TokenUnavailable as exc:
        log.warning("no token to forward with", extra={"error": exc.message, **extra})
        return refusals.token_unavailable(exc.message)
    except TimeoutError:
        return refusals.upstream_timeout(timeout)
    except OSError as exc:
        message = f"cannot reach the upstream {upstream.host}:{upstream.port}: {exc.strerror or exc}"
        if isinstance(exc, ssl.SSLCertVerificationError):
            message += "; if it uses a private CA, pass its bundle with --upstream-ca"
        log.warning("upstream unreachable", extra={"error": message, **extra})
        return refusals.unreachable(message)
    return held, conn


class Replay:
    """A request body's first bytes, while they fit in ``limit``, and whether it was sent again."""

    __slots__ = ("limit", "parts", "resent", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] | None = []  # None once the body outgrew the limit, or it was resent
        self.size = 0
        self.resent = False

    def keep(self, data: bytes) -> None:
        parts = self.parts
        if parts is not None:
            size = self.size + len(data)
            if size <= self.limit:
                parts.append(data)
                self.size = size
            else:
                self.parts = None

    def possible(self) -> bool:
        """Whether the request may be sent again: not yet resent, and its body kept whole."""
        return not self.resent and self.parts is not None

    def take(self) -> list[bytes]:
        """The body to send again; the request is not sent a third time."""
        parts = self.parts
        assert parts is not None, "take() after possible() said no"
        self.resent = True
        self.parts = None
        return parts

    def forget(self) -> None:
        """The answer has begun: the request will not be sent again."""
        self.parts = None


def may_heal(replay: Replay, token: Token | None, bearer: Bearer) -> bool:
    """Whether a 401 on ``token`` may be healed by sending the request again with a refreshed token;
    the bound on forced refreshes (``Bearer.may_reject``) is asked last: it logs when it says no."""
    return token is not None and replay.possible() and bearer.may_reject(token)
