"""The proxy's own answers: complete HTTP/1.1 responses with AIP-193 bodies.

They carry the same ``code`` and ErrorInfo ``reason`` a client already switches on for the
upstream's refusals; the domain is ``tokenrelay`` so that a client can tell the relay's refusals apart.
"""

from __future__ import annotations

from http import HTTPStatus

from ..lite import aip193
from ..lite.aip193 import Code
from .methods import ALLOW

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def error(status: int, code: Code, message: str, reason: str, *, close: bool, extra: bytes = b"") -> bytes:
    """A whole error response; ``extra`` holds further header lines, each ending in CRLF."""
    body = aip193.encode(code, message, reason)
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\n"
    ).encode()
    return head + extra + (b"Connection: close\r\n\r\n" if close else b"\r\n") + body


def token_unavailable(message: str, *, close: bool) -> bytes:
    return error(503, Code.UNAVAILABLE, message, "TOKEN_UNAVAILABLE", close=close)


def unreachable(message: str, *, close: bool) -> bytes:
    return error(502, Code.UNAVAILABLE, message, "UPSTREAM_UNREACHABLE", close=close)


def upstream_failed(message: str, *, close: bool) -> bytes:
    return error(502, Code.UNAVAILABLE, message, "UPSTREAM_FAILED", close=close)


def upstream_timeout(seconds: float, *, close: bool) -> bytes:
    return error(
        504,
        Code.DEADLINE_EXCEEDED,
        f"the upstream did not answer within {seconds:g}s (--proxy-timeout)",
        "UPSTREAM_TIMEOUT",
        close=close,
    )


def method_not_allowed(message: str) -> bytes:
    """The refusal of CONNECT or TRACE (methods.refusal says why)."""
    return error(
        405,
        Code.UNIMPLEMENTED,
        message,
        "METHOD_NOT_ALLOWED",
        close=True,
        extra=b"Allow: " + ALLOW + b"\r\n",
    )


def foreign_target() -> bytes:
    return error(
        400,
        Code.INVALID_ARGUMENT,
        "the request target names another host: tokenrelay's proxy only forwards to its --api-url; "
        "send origin-form targets such as /v1/things",
        "FOREIGN_TARGET",
        close=True,
    )


def bad_request(message: str) -> bytes:
    return error(400, Code.INVALID_ARGUMENT, message, "BAD_REQUEST", close=True)


def headers_too_large(message: str) -> bytes:
    return error(431, Code.RESOURCE_EXHAUSTED, message, "HEADERS_TOO_LARGE", close=True)


def header_timeout(seconds: float) -> bytes:
    return error(
        408,
        Code.DEADLINE_EXCEEDED,
        f"the request head did not arrive within {seconds:g}s",
        "HEADER_TIMEOUT",
        close=True,
    )


def body_timeout(seconds: float, rate: int, *, close: bool) -> bytes:
    return error(
        408,
        Code.DEADLINE_EXCEEDED,
        f"the request body arrived too slowly: it gets {seconds:g}s, plus 1s for every {rate} bytes",
        "BODY_TIMEOUT",
        close=close,
    )


def too_many_connections(limit: int) -> bytes:
    return error(
        503,
        Code.UNAVAILABLE,
        f"the proxy holds its maximum of {limit} connections (--proxy-max-connections); retry later",
        "TOO_MANY_CONNECTIONS",
        close=True,
        extra=b"Retry-After: 1\r\n",
    )
