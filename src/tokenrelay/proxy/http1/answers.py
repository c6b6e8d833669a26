"""The proxy's own answers on HTTP/1.1: a refusal (refusals.py) as a complete response, AIP-193 body."""

from __future__ import annotations

from http import HTTPStatus

from ...lite import aip193
from ..refusals import Refusal

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def render(refusal: Refusal, *, close: bool) -> bytes:
    """The whole response; ``close`` adds ``Connection: close``."""
    status, code, reason, message, fields = refusal
    body = aip193.encode(code, message, reason)
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\n"
    ).encode()
    extra = b"".join(name + b": " + value + b"\r\n" for name, value in fields)
    return head + extra + (b"Connection: close\r\n\r\n" if close else b"\r\n") + body
