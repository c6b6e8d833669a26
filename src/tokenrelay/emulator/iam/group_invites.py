"""Group invites: an offer of a role in a group, accepted by whoever presents its code in time.

The code is shown once, in the create answer; only its SHA-256 is kept. Accepting binds the caller's
identity, of any organization (this is how other organizations' identities join), to the invite's
role on its group; a single-use invite is deleted by its acceptance.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from ..errors import IAM_DOMAIN, failed_precondition, permission_denied
from ..inputs import MAX_SUBJECT, Fields
from ..model import timestamp
from . import access, groups, identities, role_bindings, roles
from .kinds import GroupInvite, RoleBinding
from .patching import Violations, merge
from .resources import Resources

KNOWN = ("roleUid", "expireTime", "singleUse", "uid", "role", "code", "createTime", "updateTime")
UPDATABLE = ("expireTime", "singleUse")
DEFAULT_TTL_MS = 7 * 86400 * 1000
MAX_TTL_MS = 30 * 86400 * 1000


def code_digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def get(res: Resources, uid: str) -> GroupInvite:
    return res.find(GroupInvite, uid)


def _fields(
    res: Resources,
    group_uid: str,
    body: Mapping[str, Any],
    violations: Violations,
    *,
    kept: GroupInvite | None,
) -> tuple[str, int, bool]:
    """``kept``: the invite a PATCH changes (its role stays; an unchanged expiry is not re-checked)."""
    fields = Fields(body, KNOWN, IAM_DOMAIN, violations=violations)
    now = res.now_ms()
    role_uid = kept.role if kept else fields.text("roleUid", required=True, limit=MAX_SUBJECT)
    if kept is None and role_uid:
        if access.role(res.store, role_uid) is None:
            fields.add("roleUid", f"no role {role_uid}")
        roles.check_usable(res, role_uid, group_uid, "roleUid", fields.violations)
    if kept is not None and body.get("expireTime") == timestamp(kept.expire_ms):
        expire_ms: int | None = kept.expire_ms
    elif "expireTime" not in body:
        expire_ms = now + DEFAULT_TTL_MS
        if kept is not None:
            fields.add("expireTime", "required: an invite cannot lose its expiry")
    else:
        expire_ms = fields.timestamp_ms("expireTime")
        if expire_ms is not None and not now < expire_ms <= now + MAX_TTL_MS:
            fields.add("expireTime", "must be in the future and at most 30 days ahead")
    single_use = fields.boolean("singleUse", True)
    fields.check()
    return role_uid, expire_ms or now, single_use


def create(res: Resources, group_uid: str, body: Mapping[str, Any]) -> tuple[GroupInvite, str]:
    """The invite and its code (shown once: only its digest is kept)."""
    groups.get(res, group_uid)
    role_uid, expire_ms, single_use = _fields(res, group_uid, body, [], kept=None)
    code = secrets.token_urlsafe(24)
    now = res.now_ms()
    invite = GroupInvite(res.new_uid(group_uid), role_uid, expire_ms, single_use, code_digest(code), now, now)
    res.store.put(invite)
    return invite, code


def patch(res: Resources, uid: str, body: Mapping[str, Any], update_mask: str | None) -> GroupInvite:
    invite = get(res, uid)
    current: dict[str, Any] = {"expireTime": timestamp(invite.expire_ms), "singleUse": invite.single_use}
    merged, changed, violations = merge(current, body, update_mask, UPDATABLE, KNOWN)
    _, expire_ms, single_use = _fields(res, invite.group, merged, violations, kept=invite)
    if changed:
        invite.expire_ms, invite.single_use, invite.update_ms = expire_ms, single_use, res.now_ms()
        res.store.put(invite)
    return invite


def delete(res: Resources, uid: str) -> None:
    res.store.remove(get(res, uid))


def accept(res: Resources, uid: str, body: Mapping[str, Any], identity_uid: str) -> RoleBinding:
    """Binds ``identity_uid`` (of any organization) to the invite's role on its group."""
    invite = get(res, uid)
    fields = Fields(body, ("code",), IAM_DOMAIN)
    code = fields.text("code", required=True, limit=256)
    fields.check()
    if not hmac.compare_digest(code_digest(code), invite.code_sha256):
        raise permission_denied(f"Permission denied: the code does not open group invite {uid}")
    if invite.expire_ms <= res.now_ms():
        raise failed_precondition(
            f"Precondition failed: group invite {uid} expired at {timestamp(invite.expire_ms)}",
            [
                {
                    "type": "EXPIRED",
                    "subject": uid,
                    "description": "ask the group's owner for a new invite",
                }
            ],
        )
    identities.get(res, identity_uid)
    binding = role_bindings.bind(res, invite.group, identity_uid, invite.role)
    if invite.single_use:
        res.store.remove(invite)
    return binding


def render(res: Resources, invite: GroupInvite) -> dict[str, Any]:
    return {
        "uid": invite.uid,
        "role": roles.get(res, invite.role).ref(),
        "expireTime": timestamp(invite.expire_ms),
        "singleUse": invite.single_use,
        "createTime": timestamp(invite.create_ms),
        "updateTime": timestamp(invite.update_ms),
    }
