"""Account associations: the cloud account (AWS, Google Cloud or Azure) tied to a group.

Exactly one of ``amazon``, ``google``, ``azure``; a PATCH naming another provider without a mask
replaces the account rather than merging two.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import IAM_DOMAIN
from ..inputs import MAX_NAME, Fields
from . import groups
from .kinds import AccountAssociation
from .patching import Violations, merge
from .resources import Resources

_AWS_ACCOUNT = re.compile(r"[0-9]{12}")
_GCP_PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_GCP_PROJECT_NUMBER = re.compile(r"[0-9]{1,20}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PROVIDERS: dict[str, dict[str, tuple[re.Pattern[str], str, bool]]] = {
    # field -> (pattern, what it must be, required)
    "amazon": {"account": (_AWS_ACCOUNT, "a 12-digit AWS account id", True)},
    "google": {
        "projectId": (_GCP_PROJECT_ID, "a Google Cloud project id (6-30 of a-z, 0-9, -)", True),
        "projectNumber": (_GCP_PROJECT_NUMBER, "a project number in digits", False),
    },
    "azure": {
        "tenantId": (_UUID, "an Entra tenant id (lowercase UUID)", True),
        "clientId": (_UUID, "an application (client) id (lowercase UUID)", True),
    },
}

KNOWN = ("name", "description", *PROVIDERS, "uid", "createTime", "updateTime")
UPDATABLE = (
    "name",
    "description",
    *PROVIDERS,
    *(f"{p}.{f}" for p, fields in PROVIDERS.items() for f in fields),
)


def get(res: Resources, uid: str) -> AccountAssociation:
    return res.find(AccountAssociation, uid)


def _fields(body: Mapping[str, Any], violations: Violations) -> tuple[str, str, str, dict[str, str]]:
    fields = Fields(body, KNOWN, IAM_DOMAIN, violations=violations)
    name = fields.text("name", limit=MAX_NAME)
    description = fields.text("description")
    present = [p for p in PROVIDERS if body.get(p) is not None]
    provider, account = "", {}
    if len(present) != 1:
        fields.add(present[1] if present else "amazon", "give exactly one of amazon, google, azure")
    for name_ in present:
        checks = PROVIDERS[name_]
        nested = fields.nested(name_, tuple(checks), required=True)
        if nested is None:
            continue
        values = {
            field: nested.pattern(field, regex, what, required=required)
            for field, (regex, what, required) in checks.items()
        }
        provider, account = name_, {k: v for k, v in values.items() if v}
    fields.check()
    return name, description, provider, account


def create(res: Resources, group_uid: str, body: Mapping[str, Any]) -> AccountAssociation:
    groups.get(res, group_uid)
    name, description, provider, account = _fields(body, [])
    now = res.now_ms()
    association = AccountAssociation(res.new_uid(group_uid), name, description, provider, account, now, now)
    res.store.put(association)
    return association


def patch(res: Resources, uid: str, body: Mapping[str, Any], update_mask: str | None) -> AccountAssociation:
    association = get(res, uid)
    current = {
        "name": association.name,
        "description": association.description,
        association.provider: dict(association.account),
    }
    if update_mask is None:
        # Naming another provider replaces the account: the old one is cleared, not merged in.
        named = [p for p in PROVIDERS if p in body and p != association.provider]
        if named:
            current.pop(association.provider)
    merged, changed, violations = merge(current, body, update_mask, UPDATABLE, KNOWN)
    name, description, provider, account = _fields(merged, violations)
    if changed:
        association.name, association.description = name, description
        association.provider, association.account = provider, account
        association.update_ms = res.now_ms()
        res.store.put(association)
    return association


def delete(res: Resources, uid: str) -> None:
    res.store.remove(get(res, uid))
