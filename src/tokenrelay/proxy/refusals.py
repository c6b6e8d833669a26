"""The proxy's own answers, whatever the protocol: status, AIP-193 code and reason, and the message.

One catalogue for both front ends: ``http1.answers.render`` writes a refusal as an HTTP/1.1
response, ``http2.answers.render`` as HTTP/2 headers and body, or as a trailers-only gRPC status. They carry
the same ``code`` and ErrorInfo ``reason`` a client already switches on for the upstream's refusals;
the domain is ``tokenrelay`` so that a client can tell the relay's refusals apart.
"""

from __future__ import annotations

from typing import NamedTuple

from ..lite.aip193 import Code

# Methods the proxy forwards, for a 405's Allow header (methods.py decides which are refused).
ALLOW = b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

Fields = tuple[tuple[bytes, bytes], ...]


class Refusal(NamedTuple):
    """One answer of the proxy's own; ``fields``: further header fields (HTTP/2 lower-cases the names)."""

    status: int
    code: Code
    reason: str
    message: str
    fields: Fields = ()


def token_unavailable(message: str) -> Refusal:
    return Refusal(503, Code.UNAVAILABLE, "TOKEN_UNAVAILABLE", message)


def unreachable(message: str) -> Refusal:
    return Refusal(502, Code.UNAVAILABLE, "UPSTREAM_UNREACHABLE", message)


def upstream_failed(message: str) -> Refusal:
    return Refusal(502, Code.UNAVAILABLE, "UPSTREAM_FAILED", message)


def upstream_timeout(seconds: float) -> Refusal:
    message = f"the upstream did not answer within {seconds:g}s (--proxy-timeout)"
    return Refusal(504, Code.DEADLINE_EXCEEDED, "UPSTREAM_TIMEOUT", message)


def method_not_allowed(message: str) -> Refusal:
    """The refusal of CONNECT or TRACE (methods.refusal says why)."""
    return Refusal(405, Code.UNIMPLEMENTED, "METHOD_NOT_ALLOWED", message, ((b"Allow", ALLOW),))


def foreign_target() -> Refusal:
    message = (
        "the request target names another host: tokenrelay's proxy only forwards to its --api-url; "
        "send origin-form targets such as /v1/things"
    )
    return Refusal(400, Code.INVALID_ARGUMENT, "FOREIGN_TARGET", message)


def bad_path() -> Refusal:
    """An HTTP/2 ``:path`` that is no origin-form target (HTTP/1.1's parser refuses such a line)."""
    message = (
        "the :path is no origin-form target (a path of visible ASCII): tokenrelay's proxy "
        "only forwards to its --api-url; send paths such as /v1/things"
    )
    return bad_request(message)


def bad_request(message: str) -> Refusal:
    return Refusal(400, Code.INVALID_ARGUMENT, "BAD_REQUEST", message)


def headers_too_large(message: str) -> Refusal:
    return Refusal(431, Code.RESOURCE_EXHAUSTED, "HEADERS_TOO_LARGE", message)


def too_many_headers(limit: int) -> Refusal:
    return headers_too_large(f"more than {limit} request header fields")


def header_timeout(seconds: float) -> Refusal:
    message = f"the request head did not arrive within {seconds:g}s"
    return Refusal(408, Code.DEADLINE_EXCEEDED, "HEADER_TIMEOUT", message)


def body_timeout(seconds: float, rate: int) -> Refusal:
    message = f"the request body arrived too slowly: it gets {seconds:g}s, plus 1s for every {rate} bytes"
    return Refusal(408, Code.DEADLINE_EXCEEDED, "BODY_TIMEOUT", message)


def too_many_connections(limit: int) -> Refusal:
    message = f"the proxy holds its maximum of {limit} connections (--proxy-max-connections); retry later"
    return Refusal(503, Code.UNAVAILABLE, "TOO_MANY_CONNECTIONS", message, ((b"Retry-After", b"1"),))
