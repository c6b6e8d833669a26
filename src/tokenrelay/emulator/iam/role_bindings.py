"""Role bindings: an identity granted a role on a group (and everything below it).

A binding names an identity of the group's own organization; identities of other organizations join
through group invites (``group_invites.accept`` binds them). Only its role can change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import IAM_DOMAIN, already_exists
from ..inputs import MAX_SUBJECT, Fields
from ..model import timestamp
from . import groups, identities, roles
from .kinds import RoleBinding
from .patching import merge
from .resources import Resources, org_of

KNOWN = ("identityUid", "roleUid", "uid", "identity", "group", "role", "createTime", "updateTime")
UPDATABLE = ("roleUid",)


def get(res: Resources, uid: str) -> RoleBinding:
    return res.find(RoleBinding, uid)


def create(res: Resources, group_uid: str, body: Mapping[str, Any]) -> RoleBinding:
    """A binding of an identity of the group's own organization (others join through invites)."""
    groups.get(res, group_uid)
    fields = Fields(body, KNOWN, IAM_DOMAIN)
    identity_uid = fields.text("identityUid", required=True, limit=MAX_SUBJECT)
    role_uid = fields.text("roleUid", required=True, limit=MAX_SUBJECT)
    fields.check()
    identity = identities.get(res, identity_uid)
    roles.get(res, role_uid)
    if org_of(identity.uid) != org_of(group_uid):
        fields.add(
            "identityUid",
            f"identity {identity_uid} belongs to another organization: invite it with a group invite",
        )
    roles.check_usable(res, role_uid, group_uid, "roleUid", fields.violations)
    fields.check()
    return bind(res, group_uid, identity_uid, role_uid)


def _refuse_twin(res: Resources, identity_uid: str, group_uid: str, role_uid: str) -> None:
    """ALREADY_EXISTS when the identity already holds the role on the group."""
    for existing in res.store.bindings_of(identity_uid):
        if existing.group == group_uid and existing.role == role_uid:
            raise already_exists(f"Already exists: role binding {existing.uid}")


def bind(res: Resources, group_uid: str, identity_uid: str, role_uid: str) -> RoleBinding:
    _refuse_twin(res, identity_uid, group_uid, role_uid)
    now = res.now_ms()
    binding = RoleBinding(res.new_uid(group_uid), identity_uid, role_uid, now, now)
    res.store.put(binding)
    return binding


def patch(res: Resources, uid: str, body: Mapping[str, Any], update_mask: str | None) -> RoleBinding:
    """Only the role changes; the identity and the group are what the binding is."""
    binding = get(res, uid)
    merged, changed, violations = merge({"roleUid": binding.role}, body, update_mask, UPDATABLE, KNOWN)
    fields = Fields(merged, KNOWN, IAM_DOMAIN, violations=violations)
    role_uid = fields.text("roleUid", required=True, limit=MAX_SUBJECT)
    fields.check()
    roles.get(res, role_uid)
    roles.check_usable(res, role_uid, binding.group, "roleUid", fields.violations)
    fields.check()
    if changed and role_uid != binding.role:
        _refuse_twin(res, binding.identity, binding.group, role_uid)
        binding.role, binding.update_ms = role_uid, res.now_ms()
        res.store.put(binding)
    return binding


def delete(res: Resources, uid: str) -> None:
    res.store.remove(get(res, uid))


def render(res: Resources, binding: RoleBinding) -> dict[str, Any]:
    """The response form, with ``identity``, ``group`` and ``role`` hydrated."""
    return {
        "uid": binding.uid,
        "identity": res.store.identities[binding.identity].ref(),
        "group": res.store.groups[binding.group].ref(),
        "role": roles.get(res, binding.role).ref(),
        "createTime": timestamp(binding.create_ms),
        "updateTime": timestamp(binding.update_ms or binding.create_ms),
    }
