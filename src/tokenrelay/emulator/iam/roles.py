"""Custom roles: a name and the permissions (``capabilities``) a binding of it grants.

A custom role lives in a group (its uid extends the group's) and can be bound, or offered by an
invite, in that group and below. Built-in roles cannot be changed or deleted; a role still named by
role bindings or group invites cannot be deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import IAM_DOMAIN, in_use, not_found, permission_denied
from ..inputs import Fields
from ..model import is_within, parent_of
from . import access, groups
from .kinds import Role
from .patching import Violations, merge
from .resources import Resources

KNOWN = ("name", "description", "capabilities", "uid", "createTime", "updateTime")
UPDATABLE = ("name", "description", "capabilities")


def get(res: Resources, uid: str) -> Role:
    """A built-in or custom role."""
    found = access.role(res.store, uid)
    if found is None:
        raise not_found(f"Not found: role {uid}")
    return found


def check_usable(res: Resources, role_uid: str, group_uid: str, field: str, violations: Violations) -> None:
    """A custom role is usable in the group that defines it and below; built-ins everywhere."""
    role = access.role(res.store, role_uid)
    if role is not None and not role.builtin and not is_within(group_uid, parent_of(role.uid)):
        violations.append(
            (field, f"role {role_uid} is defined in group {parent_of(role.uid)}: bind it there or below")
        )


def _fields(body: Mapping[str, Any], violations: Violations) -> tuple[str, str, tuple[str, ...]]:
    fields = Fields(body, KNOWN, IAM_DOMAIN, violations=violations)
    name, description = fields.name(), fields.text("description")
    capabilities = fields.strings("capabilities")
    if "capabilities" not in body or (not capabilities and isinstance(body.get("capabilities"), list)):
        fields.add("capabilities", "required: at least one permission, e.g. groups.list")
    for index, capability in enumerate(capabilities):
        if capability not in access.PERMISSIONS:
            fields.add(f"capabilities[{index}]", f"{capability!r} is not a permission (see GET roles)")
    fields.check()
    return name, description, tuple(sorted(set(capabilities)))


def create(res: Resources, group_uid: str, body: Mapping[str, Any]) -> Role:
    groups.get(res, group_uid)
    name, description, capabilities = _fields(body, [])
    now = res.now_ms()
    role = Role(res.new_uid(group_uid), name, description, capabilities, now, now)
    res.store.put(role)
    return role


def custom(res: Resources, uid: str) -> Role:
    role = get(res, uid)
    if role.builtin:
        raise permission_denied(f"Permission denied: the built-in role {role.name} cannot be changed")
    return role


def patch(res: Resources, uid: str, body: Mapping[str, Any], update_mask: str | None) -> Role:
    role = custom(res, uid)
    current = {"name": role.name, "description": role.description, "capabilities": list(role.permissions)}
    merged, changed, violations = merge(current, body, update_mask, UPDATABLE, KNOWN)
    name, description, capabilities = _fields(merged, violations)
    if changed:
        role.name, role.description, role.permissions = name, description, capabilities
        role.update_ms = res.now_ms()
        res.store.put(role)
    return role


def delete(res: Resources, uid: str) -> None:
    """Refused with FAILED_PRECONDITION while role bindings or group invites name the role."""
    role = custom(res, uid)
    users = {
        "roleBindings": sorted(b.uid for b in res.store.role_bindings.values() if b.role == uid),
        "groupInvites": sorted(i.uid for i in res.store.group_invites.values() if i.role == uid),
    }
    if any(users.values()):
        raise in_use("role", uid, {kind: uids for kind, uids in users.items() if uids})
    res.store.remove(role)
