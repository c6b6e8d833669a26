"""The proxy's own answers on HTTP/2 (refusals.py): trailers-only gRPC statuses, or AIP-193 bodies.

A gRPC client (``content-type: application/grpc...``) reads only ``grpc-status`` and ``grpc-message``
(the gRPC over HTTP/2 protocol, "Trailers-Only"); any other HTTP/2 client gets the same AIP-193 JSON
the HTTP/1.1 path sends (answers.py), whose ``code`` is the gRPC code. Further header fields
(Allow, Retry-After) go only to clients that are not gRPC.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ...lite import aip193
from ...lite.redact import scrub
from ..refusals import Refusal

Headers = list[tuple[bytes, bytes]]

_PLAIN = frozenset(range(0x20, 0x7F)) - {ord("%")}
_QUOTED = re.compile(r"b'(?:[^'\\]|\\.)*'" + r'|b"(?:[^"\\]|\\.)*"')  # bytes reprs, as h2 quotes values


class Answer(NamedTuple):
    """Response headers (ending the stream when ``body`` is empty) and a body."""

    headers: Headers
    body: bytes
    status: int  # the HTTP status, for the metrics
    grpc_status: int | None


def protocol_error(exc: Exception) -> str:
    """h2's description of a protocol error, without the header values it may quote (a peer's secrets)."""
    return scrub(_QUOTED.sub("b'...'", str(exc)))


def is_grpc(content_type: bytes) -> bool:
    return content_type.startswith(b"application/grpc")


def grpc_message(message: str) -> bytes:
    """``grpc-message``'s percent-encoding: printable ASCII except ``%`` passes as is."""
    return b"".join(bytes((b,)) if b in _PLAIN else b"%%%02X" % b for b in message.encode())


def grpc_status(headers: Headers) -> int | None:
    for name, value in headers:
        if name == b"grpc-status":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def render(refusal: Refusal, grpc: bool) -> Answer:
    """A refusal (refusals.py) as trailers-only gRPC status, or as an AIP-193 answer."""
    status, code, reason, message, fields = refusal
    if grpc:
        trailers = [
            (b":status", b"200"),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", b"%d" % code),
            (b"grpc-message", grpc_message(message)),
        ]
        return Answer(trailers, b"", 200, int(code))
    body = aip193.encode(code, message, reason)
    head = [
        (b":status", b"%d" % status),
        (b"content-type", b"application/json"),
        (b"cache-control", b"no-store"),
        (b"content-length", b"%d" % len(body)),
        *((name.lower(), value) for name, value in fields),
    ]
    return Answer(head, body, status, None)
