"""Groups: the tree every other resource lives in; an organization is a group without a parent.

A group is deleted only when nothing lives in it any more: every kind of ``kinds.RECORDS`` whose
``IN_GROUP`` holds is looked for, role bindings included, and the refusal (code 9) names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import IAM_DOMAIN, not_empty
from ..inputs import Fields
from ..model import parent_of
from .kinds import RECORDS, Group
from .patching import Violations, merge
from .resources import Resources

KNOWN = ("name", "description", "uid", "resourceLimits", "verified", "createTime", "updateTime")
UPDATABLE = ("name", "description")


def get(res: Resources, uid: str) -> Group:
    return res.find(Group, uid)


def _fields(body: Mapping[str, Any], violations: Violations) -> tuple[str, str]:
    fields = Fields(body, KNOWN, IAM_DOMAIN, violations=violations)
    name, description = fields.name(), fields.text("description")
    fields.check()
    return name, description


def create(res: Resources, parent_uid: str, body: Mapping[str, Any]) -> Group:
    """A group under ``parent_uid``, or an organization when it is ""."""
    if parent_uid:
        get(res, parent_uid)
    name, description = _fields(body, [])
    now = res.now_ms()
    group = Group(res.new_uid(parent_uid), name, description, False, now, now)
    res.store.put(group)
    return group


def patch(res: Resources, uid: str, body: Mapping[str, Any], update_mask: str | None) -> Group:
    group = get(res, uid)
    current = {"name": group.name, "description": group.description}
    merged, changed, violations = merge(current, body, update_mask, UPDATABLE, KNOWN)
    name, description = _fields(merged, violations)
    if changed:
        group.name, group.description, group.update_ms = name, description, res.now_ms()
        res.store.put(group)
    return group


def delete(res: Resources, uid: str) -> None:
    """Refused with FAILED_PRECONDITION while anything lives in the group, role bindings included."""
    group = get(res, uid)
    children = {
        kind.PLURAL: sorted(child for child in res.store.table(kind) if parent_of(child) == uid)
        for kind in RECORDS
        if kind.IN_GROUP
    }
    blocking = {plural: uids for plural, uids in children.items() if uids}
    if blocking:
        raise not_empty(uid, blocking)
    res.store.remove(group)
