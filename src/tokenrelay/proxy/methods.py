"""Which request methods the proxy forwards, and sends again after a failure: one policy for the
HTTP/1.1 front end (``http1.request``) and the HTTP/2 one (``http2.downstream``).

On HTTP/1.1 the parser has already refused a method that is not a token; an HTTP/2 ``:method`` is
any byte string, and ``GET /admin`` would be forwarded as is.
"""

from __future__ import annotations

import re

from . import refusals
from .refusals import ALLOW, Refusal

# Methods a proxy may send again after a failure (RFC 9110 §9.2.2); others may have been processed.
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"PUT", b"DELETE", b"OPTIONS"})
_REFUSED = {
    b"CONNECT": "tokenrelay's proxy only forwards requests to its --api-url",  # a tunnel elsewhere
    b"TRACE": "it would echo the injected Authorization header back to the client",
}
_COMMON = frozenset(ALLOW.split(b", "))
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 §5.6.2


def refusal(method: bytes) -> Refusal | None:
    """None when ``method`` may be forwarded; else a 405 for a refused method, a 400 for bytes that
    are no method."""
    if method in _COMMON:
        return None
    reason = _REFUSED.get(method)
    if reason is not None:
        return refusals.method_not_allowed(f"{method.decode()} is refused: {reason}")
    if _TOKEN.fullmatch(method) is None:
        return refusals.bad_request("the request method is not a method token (RFC 9110 §9.1)")
    return None
