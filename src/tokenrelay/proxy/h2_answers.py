"""The proxy's own answers on HTTP/2: trailers-only gRPC statuses, or AIP-193 bodies for other clients.

A gRPC client (``content-type: application/grpc...``) reads only ``grpc-status`` and ``grpc-message``
(the gRPC over HTTP/2 protocol, "Trailers-Only"); any other HTTP/2 client gets the same AIP-193 JSON
the HTTP/1.1 path sends (answers.py), whose ``code`` is the gRPC code.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..lite import aip193
from ..lite.aip193 import Code
from ..lite.redact import scrub
from .methods import ALLOW

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


def error(grpc: bool, status: int, code: Code, message: str, reason: str) -> Answer:
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
    ]
    return Answer(head, body, status, None)


def token_unavailable(grpc: bool, message: str) -> Answer:
    return error(grpc, 503, Code.UNAVAILABLE, message, "TOKEN_UNAVAILABLE")


def unreachable(grpc: bool, message: str) -> Answer:
    return error(grpc, 502, Code.UNAVAILABLE, message, "UPSTREAM_UNREACHABLE")


def upstream_failed(grpc: bool, message: str) -> Answer:
    return error(grpc, 502, Code.UNAVAILABLE, message, "UPSTREAM_FAILED")


def upstream_timeout(grpc: bool, seconds: float) -> Answer:
    message = f"the upstream did not answer within {seconds:g}s (--proxy-timeout)"
    return error(grpc, 504, Code.DEADLINE_EXCEEDED, message, "UPSTREAM_TIMEOUT")


def method_not_allowed(grpc: bool, message: str) -> Answer:
    """The refusal of CONNECT or TRACE (methods.refusal says why)."""
    answer = error(grpc, 405, Code.UNIMPLEMENTED, message, "METHOD_NOT_ALLOWED")
    return answer if grpc else answer._replace(headers=[*answer.headers, (b"allow", ALLOW)])


def bad_request(grpc: bool, message: str) -> Answer:
    return error(grpc, 400, Code.INVALID_ARGUMENT, message, "BAD_REQUEST")


def headers_too_large(grpc: bool, message: str) -> Answer:
    return error(grpc, 431, Code.RESOURCE_EXHAUSTED, message, "HEADERS_TOO_LARGE")
