"""Identities: who a workload is, matched by the ``issuer`` and ``subject`` of its OIDC token.

An identity named by role bindings cannot be deleted (code 9, naming them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import IAM_DOMAIN, in_use
from ..inputs import MAX_NAME, MAX_SUBJECT, Fields
from . import groups
from .kinds import Identity
from .patching import Violations, merge
from .resources import Resources

KNOWN = ("name", "description", "claimMatch", "uid", "lastSeenTime", "createTime", "updateTime")
UPDATABLE = ("name", "description", "claimMatch", "claimMatch.issuer", "claimMatch.subject")


def get(res: Resources, uid: str) -> Identity:
    return res.find(Identity, uid)


def _fields(body: Mapping[str, Any], violations: Violations) -> tuple[str, str, str, str]:
    fields = Fields(body, KNOWN, IAM_DOMAIN, violations=violations)
    name = fields.text("name", limit=MAX_NAME)
    description = fields.text("description")
    match = fields.nested("claimMatch", ("issuer", "subject"), required=True)
    issuer = subject = ""
    if match is not None:
        issuer = match.url("issuer", "the URL of a token issuer")
        subject = match.text("subject", required=True, limit=MAX_SUBJECT)
    fields.check()
    return name, description, issuer, subject


def create(res: Resources, group_uid: str, body: Mapping[str, Any]) -> Identity:
    groups.get(res, group_uid)
    name, description, issuer, subject = _fields(body, [])
    now = res.now_ms()
    identity = Identity(res.new_uid(group_uid), name, description, issuer, subject, now, now, now)
    res.store.put(identity)
    return identity


def patch(res: Resources, uid: str, body: Mapping[str, Any], update_mask: str | None) -> Identity:
    identity = get(res, uid)
    current = {
        "name": identity.name,
        "description": identity.description,
        "claimMatch": {"issuer": identity.issuer, "subject": identity.subject},
    }
    merged, changed, violations = merge(current, body, update_mask, UPDATABLE, KNOWN)
    name, description, issuer, subject = _fields(merged, violations)
    if changed:
        identity.name, identity.description = name, description
        identity.issuer, identity.subject = issuer, subject
        identity.update_ms = res.now_ms()
        res.store.put(identity)
    return identity


def delete(res: Resources, uid: str) -> None:
    """Refused with FAILED_PRECONDITION while role bindings name the identity."""
    identity = get(res, uid)
    bindings = sorted(b.uid for b in res.store.bindings_of(uid))
    if bindings:
        raise in_use("identity", uid, {"roleBindings": bindings})
    res.store.remove(identity)
