"""AIP-193 error bodies, the shape the upstream API uses for every refusal.

tokenrelay answers in the same shape (local API, proxy, emulator) so that a client that switches on
``code`` and ``details[].reason`` handles the relay's refusals and the upstream's with one code path.
This module is standard-library only: the credential helpers parse these bodies too.
"""

from __future__ import annotations

import json
from enum import IntEnum

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the helpers' start-up
if TYPE_CHECKING:
    from typing import Any

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
PRECONDITION_FAILURE_TYPE = "type.googleapis.com/google.rpc.PreconditionFailure"
DOMAIN = "tokenrelay"


class Code(IntEnum):
    """The gRPC status codes that appear in this project."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


# The usual gRPC-to-HTTP mapping (google.rpc.Code's documentation); 9 maps to 400 as AIP-193 says.
HTTP_STATUS: dict[Code, int] = {
    Code.OK: 200,
    Code.CANCELLED: 499,
    Code.UNKNOWN: 500,
    Code.INVALID_ARGUMENT: 400,
    Code.DEADLINE_EXCEEDED: 504,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.FAILED_PRECONDITION: 400,
    Code.ABORTED: 409,
    Code.OUT_OF_RANGE: 400,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.DATA_LOSS: 500,
    Code.UNAUTHENTICATED: 401,
}


def error_info(reason: str, domain: str = DOMAIN, **metadata: str) -> dict[str, Any]:
    """An ErrorInfo detail object."""
    detail: dict[str, Any] = {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": domain}
    if metadata:
        detail["metadata"] = dict(metadata)
    return detail


def body(code: Code, message: str, *details: dict[str, Any]) -> dict[str, Any]:
    """The AIP-193 error object: ``{"code", "message", "details"}``."""
    return {"code": int(code), "message": message, "details": list(details)}


def encode(code: Code, message: str, reason: str, domain: str = DOMAIN) -> bytes:
    """A complete JSON error body with one ErrorInfo, ready to send."""
    return json.dumps(body(code, message, error_info(reason, domain))).encode()


def parse(raw: bytes | str) -> tuple[int, str, str] | None:
    """``(code, message, reason)`` from an AIP-193 body, or None when it is not one.

    ``reason`` is the first ErrorInfo's reason, or "" when there is none.
    """
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        obj = obj["error"]  # google.rpc.Status wrapped as {"error": {...}} by some gateways
    if not isinstance(obj, dict):
        return None
    code, message = obj.get("code"), obj.get("message")
    if not isinstance(code, int) or not isinstance(message, str):
        return None
    reason = ""
    details = obj.get("details")
    if isinstance(details, list):
        for detail in details:
            if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO_TYPE:
                reason = str(detail.get("reason", ""))
                break
    return code, message, reason
