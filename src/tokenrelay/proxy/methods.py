"""Which request methods the proxy forwards, and sends again after a failure: one policy for the
HTTP/1.1 side (downstream.py) and the HTTP/2 side (h2_downstream.py).

On HTTP/1.1 the parser has already refused a method that is not a token; an HTTP/2 ``:method`` is
any byte string, and ``GET /admin`` would be forwarded as is.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Methods a proxy may send again after a failure (RFC 9110 §9.2.2); others may have been processed.
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"PUT", b"DELETE", b"OPTIONS"})
ALLOW = b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
_REFUSED = {
    b"CONNECT": "tokenrelay's proxy only forwards requests to its --api-url",  # a tunnel elsewhere
    b"TRACE": "it would echo the injected Authorization header back to the client",
}
_COMMON = frozenset({b"GET", b"HEAD", b"POST", b"PUT", b"PATCH", b"DELETE", b"OPTIONS"})
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 §5.6.2


class Refusal(NamedTuple):
    """Why a method is not forwarded: 405 for a refused method, 400 for bytes that are no method."""

    status: int
    message: str


def refusal(method: bytes) -> Refusal | None:
    """None when ``method`` may be forwarded; else why not."""
    if method in _COMMON:
        return None
    reason = _REFUSED.get(method)
    if reason is not None:
        return Refusal(405, f"{method.decode()} is refused: {reason}")
    if _TOKEN.fullmatch(method) is None:
        return Refusal(400, "the request method is not a method token (RFC 9110 §9.1)")
    return None
