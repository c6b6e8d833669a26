"""The document's rules on IAM resources, apart from HTTP: validation, PATCH, delete guards.

Used by the API handlers and by Python callers (``tokenrelay dev``, tests, benchmarks) alike, so a
resource made either way obeys the same rules. Every validation collects all failing fields before
refusing. Nothing that something else refers to disappears under it: a group with children, an
identity or a role named by role bindings (or a role offered by invites) is refused with code 9,
naming what still refers to it.

Groups, identities, role bindings and repos live here; custom roles, identity providers, account
associations, group invites and advisories in their own modules (``roles``, ``providers``,
``associations``, ``invites``, ``advisories``), as functions over ``Resources``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from . import access
from .errors import (
    IAM_DOMAIN,
    already_exists,
    in_use,
    not_empty,
    not_found,
)
from .inputs import MAX_NAME, Fields
from .model import (
    RECORDS,
    Group,
    Identity,
    Repo,
    Role,
    RoleBinding,
    is_within,
    new_child_uid,
    new_org_uid,
    parent_of,
    timestamp,
)
from .patching import Violations, merge
from .store import Store

R = TypeVar("R")

MAX_SUBJECT = 1024
# Per kind: the fields a body may name (input and output forms), and those PATCH may change.
GROUP_KNOWN = ("name", "description", "uid", "resourceLimits", "verified", "createTime", "updateTime")
GROUP_UPDATABLE = ("name", "description")
IDENTITY_KNOWN = ("name", "description", "claimMatch", "uid", "lastSeenTime", "createTime", "updateTime")
IDENTITY_UPDATABLE = ("name", "description", "claimMatch", "claimMatch.issuer", "claimMatch.subject")
BINDING_KNOWN = ("identityUid", "roleUid", "uid", "identity", "group", "role", "createTime", "updateTime")
BINDING_UPDATABLE = ("roleUid",)


def org_of(uid: str) -> str:
    return uid.partition("/")[0]


class Resources:
    def __init__(self, store: Store, wall: Callable[[], float] = time.time) -> None:
        self.store = store
        self._wall = wall

    def now_ms(self) -> int:
        return int(self._wall() * 1000)

    def new_uid(self, parent: str) -> str:
        while True:
            uid = new_child_uid(parent) if parent else new_org_uid()
            if not self.store.exists(uid):
                return uid

    def find(self, table: Mapping[str, R], label: str, uid: str) -> R:
        record = table.get(uid)
        if record is None:
            raise not_found(f"Not found: {label} {uid}")
        return record

    def _children(self, table: Mapping[str, Any], group_uid: str) -> list[str]:
        return sorted(uid for uid in table if parent_of(uid) == group_uid)

    # -- groups -----------------------------------------------------------------------------------

    def group(self, uid: str) -> Group:
        return self.find(self.store.groups, "group", uid)

    def _group_fields(self, body: Mapping[str, Any], violations: Violations) -> tuple[str, str]:
        fields = Fields(body, GROUP_KNOWN, IAM_DOMAIN, violations=violations)
        name, description = fields.name(), fields.text("description")
        fields.check()
        return name, description

    def create_group(self, parent_uid: str, body: Mapping[str, Any]) -> Group:
        """A group under ``parent_uid``, or an organization when it is ""."""
        if parent_uid:
            self.group(parent_uid)
        name, description = self._group_fields(body, [])
        now = self.now_ms()
        group = Group(self.new_uid(parent_uid), name, description, False, now, now)
        self.store.put(group)
        return group

    def patch_group(self, uid: str, body: Mapping[str, Any], update_mask: str | None) -> Group:
        group = self.group(uid)
        current = {"name": group.name, "description": group.description}
        merged, changed, violations = merge(current, body, update_mask, GROUP_UPDATABLE, GROUP_KNOWN)
        name, description = self._group_fields(merged, violations)
        if changed:
            group.name, group.description, group.update_ms = name, description, self.now_ms()
            self.store.put(group)
        return group

    def delete_group(self, uid: str) -> None:
        """Refused with FAILED_PRECONDITION while anything lives in the group, role bindings included."""
        self.group(uid)
        children = {
            kind.PLURAL: self._children(self.store.table(kind), uid) for kind in RECORDS if kind.IN_GROUP
        }
        blocking = {kind: uids for kind, uids in children.items() if uids}
        if blocking:
            raise not_empty(uid, blocking)
        self.store.remove(self.store.groups[uid])

    # -- identities -------------------------------------------------------------------------------

    def identity(self, uid: str) -> Identity:
        return self.find(self.store.identities, "identity", uid)

    def _identity_fields(self, body: Mapping[str, Any], violations: Violations) -> tuple[str, str, str, str]:
        fields = Fields(body, IDENTITY_KNOWN, IAM_DOMAIN, violations=violations)
        name = fields.text("name", limit=MAX_NAME)
        description = fields.text("description")
        match = fields.nested("claimMatch", ("issuer", "subject"), required=True)
        issuer = subject = ""
        if match is not None:
            issuer = match.url("issuer", "the URL of a token issuer")
            subject = match.text("subject", required=True, limit=MAX_SUBJECT)
        fields.check()
        return name, description, issuer, subject

    def create_identity(self, group_uid: str, body: Mapping[str, Any]) -> Identity:
        self.group(group_uid)
        name, description, issuer, subject = self._identity_fields(body, [])
        now = self.now_ms()
        identity = Identity(self.new_uid(group_uid), name, description, issuer, subject, now, now, now)
        self.store.put(identity)
        return identity

    def patch_identity(self, uid: str, body: Mapping[str, Any], update_mask: str | None) -> Identity:
        identity = self.identity(uid)
        current = {
            "name": identity.name,
            "description": identity.description,
            "claimMatch": {"issuer": identity.issuer, "subject": identity.subject},
        }
        merged, changed, violations = merge(current, body, update_mask, IDENTITY_UPDATABLE, IDENTITY_KNOWN)
        name, description, issuer, subject = self._identity_fields(merged, violations)
        if changed:
            identity.name, identity.description = name, description
            identity.issuer, identity.subject = issuer, subject
            identity.update_ms = self.now_ms()
            self.store.put(identity)
        return identity

    def delete_identity(self, uid: str) -> None:
        """Refused with FAILED_PRECONDITION while role bindings name the identity."""
        identity = self.identity(uid)
        bindings = sorted(b.uid for b in self.store.bindings_of(uid))
        if bindings:
            raise in_use("identity", uid, {"roleBindings": bindings})
        self.store.remove(identity)

    # -- roles ------------------------------------------------------------------------------------

    def role(self, uid: str) -> Role:
        found = access.role(self.store, uid)
        if found is None:
            raise not_found(f"Not found: role {uid}")
        return found

    def check_role_usable(self, role_uid: str, group_uid: str, field: str, violations: Violations) -> None:
        """A custom role is usable in the group that defines it and below; built-ins everywhere."""
        role = access.role(self.store, role_uid)
        if role is not None and not role.builtin and not is_within(group_uid, parent_of(role.uid)):
            violations.append(
                (field, f"role {role_uid} is defined in group {parent_of(role.uid)}: bind it there or below")
            )

    # -- role bindings ----------------------------------------------------------------------------

    def binding(self, uid: str) -> RoleBinding:
        return self.find(self.store.role_bindings, "role binding", uid)

    def create_binding(self, group_uid: str, body: Mapping[str, Any]) -> RoleBinding:
        """A binding of an identity of the group's own organization (others join through invites)."""
        self.group(group_uid)
        fields = Fields(body, BINDING_KNOWN, IAM_DOMAIN)
        identity_uid = fields.text("identityUid", required=True, limit=MAX_SUBJECT)
        role_uid = fields.text("roleUid", required=True, limit=MAX_SUBJECT)
        fields.check()
        identity = self.identity(identity_uid)
        self.role(role_uid)
        if org_of(identity.uid) != org_of(group_uid):
            fields.add(
                "identityUid",
                f"identity {identity_uid} belongs to another organization: invite it with a group invite",
            )
        self.check_role_usable(role_uid, group_uid, "roleUid", fields.violations)
        fields.check()
        return self.bind(group_uid, identity_uid, role_uid)

    def bind(self, group_uid: str, identity_uid: str, role_uid: str) -> RoleBinding:
        for existing in self.store.bindings_of(identity_uid):
            if existing.group == group_uid and existing.role == role_uid:
                raise already_exists(f"Already exists: role binding {existing.uid}")
        now = self.now_ms()
        binding = RoleBinding(self.new_uid(group_uid), identity_uid, role_uid, now, now)
        self.store.put(binding)
        return binding

    def patch_binding(self, uid: str, body: Mapping[str, Any], update_mask: str | None) -> RoleBinding:
        """Only the role changes; the identity and the group are what the binding is."""
        binding = self.binding(uid)
        merged, changed, violations = merge(
            {"roleUid": binding.role}, body, update_mask, BINDING_UPDATABLE, BINDING_KNOWN
        )
        fields = Fields(merged, BINDING_KNOWN, IAM_DOMAIN, violations=violations)
        role_uid = fields.text("roleUid", required=True, limit=MAX_SUBJECT)
        fields.check()
        self.role(role_uid)
        self.check_role_usable(role_uid, binding.group, "roleUid", fields.violations)
        fields.check()
        if changed and role_uid != binding.role:
            for existing in self.store.bindings_of(binding.identity):
                if existing.group == binding.group and existing.role == role_uid:
                    raise already_exists(f"Already exists: role binding {existing.uid}")
            binding.role, binding.update_ms = role_uid, self.now_ms()
            self.store.put(binding)
        return binding

    def delete_binding(self, uid: str) -> None:
        self.store.remove(self.binding(uid))

    def render_binding(self, binding: RoleBinding) -> dict[str, Any]:
        """The response form, with ``identity``, ``group`` and ``role`` hydrated."""
        return {
            "uid": binding.uid,
            "identity": self.store.identities[binding.identity].ref(),
            "group": self.store.groups[binding.group].ref(),
            "role": self.role(binding.role).ref(),
            "createTime": timestamp(binding.create_ms),
            "updateTime": timestamp(binding.update_ms or binding.create_ms),
        }

    # -- repos ------------------------------------------------------------------------------------

    def repo(self, uid: str) -> Repo:
        return self.find(self.store.repos, "repo", uid)

    def create_repo(self, group_uid: str, name: str) -> Repo:
        """Repos have no create endpoint upstream: seed data, tests and ``tokenrelay dev`` use this."""
        self.group(group_uid)
        repo = Repo(self.new_uid(group_uid), name, self.now_ms())
        self.store.put(repo)
        return repo
