"""The emulator's refusals: AIP-193 bodies with the HTTP statuses documented in docs/emulator.md.

Every handler raises ``ApiError``; one middleware turns it into a response. The bodies follow the
upstream document's observed cases exactly (ErrorInfo first, then BadRequest or PreconditionFailure).
Every refusal, routing errors included, carries the ErrorInfo: a client switches on ``code`` and
``reason`` whatever went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from ..lite import aip193
from ..lite.aip193 import Code

IAM_DOMAIN = "iam.emulator.tokenrelay"
STS_DOMAIN = "sts.emulator.tokenrelay"
REGISTRY_DOMAIN = "registry.emulator.tokenrelay"
VULNERABILITIES_DOMAIN = "vulnerabilities.emulator.tokenrelay"

NAME_PATTERN_RULE = (
    "must match the pattern ^[a-z0-9 ._-]{1,}$ (at least one character of lowercase letter, "
    "digit, space, dot, underscore, hyphen)"
)
NAMED_LIMIT = 5  # a violation names at most this many resources, then "and N more"


def domain_of(path: str) -> str:
    """The ErrorInfo domain of a request path."""
    if path.startswith("/registry/"):
        return REGISTRY_DOMAIN
    if path.startswith("/vulnerabilities/"):
        return VULNERABILITIES_DOMAIN
    if path.startswith(("/sts/", "/emulator/", "/.well-known/")):
        return STS_DOMAIN
    return IAM_DOMAIN


class ApiError(Exception):
    """A refusal: ``code`` picks the HTTP status, ``details`` follow AIP-193."""

    def __init__(self, code: Code, message: str, *details: dict[str, Any]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.headers: dict[str, str] = {}

    @property
    def status(self) -> int:
        return aip193.HTTP_STATUS[self.code]

    def body(self) -> dict[str, Any]:
        return aip193.body(self.code, self.message, *self.details)

    def response(self, status: int | None = None) -> web.Response:
        return web.Response(
            status=status or self.status,
            body=json.dumps(self.body()).encode(),
            content_type="application/json",
            headers=self.headers,
        )


def _simple(code: Code, message: str, domain: str, **metadata: str) -> ApiError:
    return ApiError(code, message, aip193.error_info(code.name, domain, **metadata))


def invalid_arguments(violations: Sequence[tuple[str, str]], domain: str = IAM_DOMAIN) -> ApiError:
    """3 with ErrorInfo and a BadRequest naming every failing field, the document's create-group form."""
    message = "; ".join(f"{field}: {description}" for field, description in violations)
    return ApiError(
        Code.INVALID_ARGUMENT,
        f"Invalid argument: {message}",
        aip193.error_info("INVALID_ARGUMENT", domain),
        {
            "@type": aip193.BAD_REQUEST_TYPE,
            "fieldViolations": [{"field": f, "description": d} for f, d in violations],
        },
    )


def invalid_argument(field: str, description: str, domain: str = IAM_DOMAIN) -> ApiError:
    return invalid_arguments([(field, description)], domain)


def not_found(message: str, domain: str = IAM_DOMAIN) -> ApiError:
    return _simple(Code.NOT_FOUND, message, domain)


def permission_denied(message: str, domain: str = IAM_DOMAIN, **metadata: str) -> ApiError:
    return _simple(Code.PERMISSION_DENIED, message, domain, **metadata)


def unauthenticated(message: str, domain: str = IAM_DOMAIN, **metadata: str) -> ApiError:
    return _simple(Code.UNAUTHENTICATED, message, domain, **metadata)


def already_exists(message: str, domain: str = IAM_DOMAIN) -> ApiError:
    return _simple(Code.ALREADY_EXISTS, message, domain)


def unavailable(message: str, domain: str = STS_DOMAIN) -> ApiError:
    return _simple(Code.UNAVAILABLE, message, domain)


def routing(code: Code, message: str, path: str) -> ApiError:
    """An unknown path or a method a path does not have, in the same shape as every other refusal."""
    return _simple(code, message, domain_of(path))


def named(uids: Sequence[str]) -> str:
    shown = ", ".join(uids[:NAMED_LIMIT])
    return shown + (f" and {len(uids) - NAMED_LIMIT} more" if len(uids) > NAMED_LIMIT else "")


def failed_precondition(
    message: str, violations: Sequence[dict[str, str]], domain: str = IAM_DOMAIN
) -> ApiError:
    return ApiError(
        Code.FAILED_PRECONDITION,
        message,
        aip193.error_info("FAILED_PRECONDITION", domain),
        {"@type": aip193.PRECONDITION_FAILURE_TYPE, "violations": list(violations)},
    )


def not_empty(group_uid: str, children: dict[str, list[str]]) -> ApiError:
    """9 for a group that still has children: the document's delete-group form, one violation per
    kind of child, naming them."""
    first = next(iter(children))
    return failed_precondition(
        f"Precondition failed: cannot delete group with child {first}",
        [
            {
                "type": "RESOURCE_NOT_EMPTY",
                "subject": group_uid,
                "description": f"group has {len(uids)} child {kind}: {named(uids)}",
            }
            for kind, uids in children.items()
        ],
    )


def in_use(label: str, uid: str, users: dict[str, list[str]]) -> ApiError:
    """9 for a resource that others still refer to (role bindings naming an identity or a role)."""
    first = next(iter(users))
    return failed_precondition(
        f"Precondition failed: cannot delete {label} still referred to by {first}",
        [
            {
                "type": "RESOURCE_IN_USE",
                "subject": uid,
                "description": f"{label} is named by {len(uids)} {kind}: {named(uids)}",
            }
            for kind, uids in users.items()
        ],
    )
