"""The emulator's refusals: AIP-193 bodies with the HTTP statuses documented in docs/emulator.md.

Every handler raises ``ApiError``; one middleware turns it into a response. The bodies follow the
upstream document's observed cases exactly (ErrorInfo first, then BadRequest or PreconditionFailure).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from .. import aip193
from ..aip193 import Code

IAM_DOMAIN = "iam.emulator.tokenrelay"
STS_DOMAIN = "sts.emulator.tokenrelay"
REGISTRY_DOMAIN = "registry.emulator.tokenrelay"

NAME_PATTERN_RULE = (
    "must match the pattern ^[a-z0-9 ._-]{1,}$ (at least one character of lowercase letter, "
    "digit, space, dot, underscore, hyphen)"
)


class ApiError(Exception):
    """A refusal: ``code`` picks the HTTP status, ``details`` follow AIP-193."""

    def __init__(self, code: Code, message: str, *details: dict[str, Any]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    @property
    def status(self) -> int:
        return aip193.HTTP_STATUS[self.code]

    def body(self) -> dict[str, Any]:
        return aip193.body(self.code, self.message, *self.details)

    def response(self) -> web.Response:
        return web.Response(
            status=self.status, body=json.dumps(self.body()).encode(), content_type="application/json"
        )


def _simple(code: Code, message: str, domain: str) -> ApiError:
    return ApiError(code, message, aip193.error_info(code.name, domain))


def invalid_argument(field: str, description: str, domain: str = IAM_DOMAIN) -> ApiError:
    """3 with ErrorInfo and a BadRequest naming the field, the document's create-group form."""
    return ApiError(
        Code.INVALID_ARGUMENT,
        f"Invalid argument: {field}: {description}",
        aip193.error_info("INVALID_ARGUMENT", domain),
        {
            "@type": aip193.BAD_REQUEST_TYPE,
            "fieldViolations": [{"field": field, "description": description}],
        },
    )


def not_found(message: str, domain: str = IAM_DOMAIN) -> ApiError:
    return _simple(Code.NOT_FOUND, message, domain)


def permission_denied(message: str, domain: str = IAM_DOMAIN) -> ApiError:
    return _simple(Code.PERMISSION_DENIED, message, domain)


def unauthenticated(message: str, domain: str = IAM_DOMAIN) -> ApiError:
    return _simple(Code.UNAUTHENTICATED, message, domain)


def already_exists(message: str, domain: str = IAM_DOMAIN) -> ApiError:
    return _simple(Code.ALREADY_EXISTS, message, domain)


def unavailable(message: str, domain: str = STS_DOMAIN) -> ApiError:
    return _simple(Code.UNAVAILABLE, message, domain)


def not_empty(group_uid: str, kinds: dict[str, int]) -> ApiError:
    """9 for a group that still has children: the document's delete-group form."""
    first = next(iter(kinds))
    return ApiError(
        Code.FAILED_PRECONDITION,
        f"Precondition failed: cannot delete group with child {first}",
        aip193.error_info("FAILED_PRECONDITION", IAM_DOMAIN),
        {
            "@type": aip193.PRECONDITION_FAILURE_TYPE,
            "violations": [
                {
                    "type": "RESOURCE_NOT_EMPTY",
                    "subject": group_uid,
                    "description": f"group has {count} child {kind}",
                }
                for kind, count in kinds.items()
            ],
        },
    )
