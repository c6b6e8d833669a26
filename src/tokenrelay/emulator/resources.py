"""The document's rules on resources, apart from HTTP: validation, PATCH semantics, delete guards.

Used by the API handlers and by Python callers (``tokenrelay dev``, tests, benchmarks) alike, so a
resource made either way obeys the same rules.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from .access import ROLES
from .errors import NAME_PATTERN_RULE, already_exists, invalid_argument, not_empty, not_found
from .model import (
    Group,
    Identity,
    Repo,
    RoleBinding,
    new_child_uid,
    new_org_uid,
    parent_of,
    timestamp,
)
from .store import Store

NAME_PATTERN = re.compile(r"[a-z0-9 ._-]+")  # the document's ^[a-z0-9 ._-]{1,}$, matched in full
GROUP_FIELDS = ("name", "description")  # the fields a PATCH may change; the rest are output only


def _name(value: Any) -> str:
    if not isinstance(value, str) or NAME_PATTERN.fullmatch(value) is None:
        raise invalid_argument("name", NAME_PATTERN_RULE)
    return value


def _text(body: Mapping[str, Any], field: str, required: bool = False) -> str:
    value = body.get(field, "")
    if not isinstance(value, str):
        raise invalid_argument(field, "must be a string")
    if required and not value:
        raise invalid_argument(field, "required")
    return value


class Resources:
    def __init__(self, store: Store, wall: Callable[[], float] = time.time) -> None:
        self.store = store
        self._wall = wall

    def _now_ms(self) -> int:
        return int(self._wall() * 1000)

    def _new_uid(self, parent: str) -> str:
        while True:
            uid = new_child_uid(parent) if parent else new_org_uid()
            if not self.store.exists(uid):
                return uid

    # -- groups -----------------------------------------------------------------------------------

    def group(self, uid: str) -> Group:
        group = self.store.groups.get(uid)
        if group is None:
            raise not_found(f"Not found: group {uid}")
        return group

    def create_group(self, parent_uid: str, body: Mapping[str, Any]) -> Group:
        """A group under ``parent_uid``, or an organization when it is ""."""
        if parent_uid:
            self.group(parent_uid)
        name = _name(body.get("name"))
        description = _text(body, "description")
        now = self._now_ms()
        group = Group(self._new_uid(parent_uid), name, description, False, now, now)
        self.store.put(group)
        return group

    def patch_group(self, uid: str, body: Mapping[str, Any], update_mask: str | None) -> Group:
        """Rule 3: no mask changes the fields present. Rule 4: a mask changes exactly its fields,
        clearing a listed field the body leaves out (AIP-134), and ignoring everything else."""
        group = self.group(uid)
        if update_mask is None:
            fields = [field for field in GROUP_FIELDS if field in body]
        else:
            fields = [part.strip() for part in update_mask.split(",") if part.strip()]
            for field in fields:
                if field not in GROUP_FIELDS:
                    raise invalid_argument(
                        "updateMask", f"{field!r} cannot be updated; updatable: {', '.join(GROUP_FIELDS)}"
                    )
        changes = {field: body.get(field, "") for field in fields}
        if "name" in changes:
            changes["name"] = _name(changes["name"])
        if "description" in changes:
            changes["description"] = _text(changes, "description")
        if changes:
            for field, value in changes.items():
                setattr(group, field, value)
            group.update_ms = self._now_ms()
            self.store.put(group)
        return group

    def delete_group(self, uid: str) -> None:
        """Refused with FAILED_PRECONDITION while child groups, repos or identities exist; the
        group's own role bindings go with it."""
        self.group(uid)
        counts = {
            "repos": sum(1 for r in self.store.repos if parent_of(r) == uid),
            "groups": sum(1 for g in self.store.groups if parent_of(g) == uid),
            "identities": sum(1 for i in self.store.identities if parent_of(i) == uid),
        }
        blocking = {kind: count for kind, count in counts.items() if count}
        if blocking:
            raise not_empty(uid, blocking)
        for binding in [b for b in self.store.bindings.values() if b.group == uid]:
            self.store.remove(binding)
        self.store.remove(self.store.groups[uid])

    # -- identities -------------------------------------------------------------------------------

    def identity(self, uid: str) -> Identity:
        identity = self.store.identities.get(uid)
        if identity is None:
            raise not_found(f"Not found: identity {uid}")
        return identity

    def create_identity(self, group_uid: str, body: Mapping[str, Any]) -> Identity:
        self.group(group_uid)
        claim_match = body.get("claimMatch")
        if not isinstance(claim_match, Mapping):
            raise invalid_argument("claimMatch", "required: an object with issuer and subject")
        issuer = claim_match.get("issuer")
        subject = claim_match.get("subject")
        if not isinstance(issuer, str) or not issuer.startswith(("https://", "http://")):
            raise invalid_argument("claimMatch.issuer", "required: the URL of a token issuer")
        if not isinstance(subject, str) or not subject:
            raise invalid_argument("claimMatch.subject", "required: the subject claim value")
        now = self._now_ms()
        identity = Identity(
            self._new_uid(group_uid),
            _text(body, "name"),
            _text(body, "description"),
            issuer,
            subject,
            now,
            now,
            now,
        )
        self.store.put(identity)
        return identity

    def delete_identity(self, uid: str) -> None:
        """The identity and every role binding naming it."""
        identity = self.identity(uid)
        for binding in list(self.store.bindings_of(uid)):
            self.store.remove(binding)
        self.store.remove(identity)

    # -- role bindings ----------------------------------------------------------------------------

    def binding(self, uid: str) -> RoleBinding:
        binding = self.store.bindings.get(uid)
        if binding is None:
            raise not_found(f"Not found: role binding {uid}")
        return binding

    def create_binding(self, group_uid: str, body: Mapping[str, Any]) -> RoleBinding:
        self.group(group_uid)
        identity_uid = _text(body, "identityUid", required=True)
        role_uid = _text(body, "roleUid", required=True)
        self.identity(identity_uid)
        if role_uid not in ROLES:
            raise not_found(f"Not found: role {role_uid}")
        for existing in self.store.bindings_of(identity_uid):
            if existing.group == group_uid and existing.role == role_uid:
                raise already_exists(f"Already exists: role binding {existing.uid}")
        binding = RoleBinding(self._new_uid(group_uid), identity_uid, role_uid, self._now_ms())
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
            "role": ROLES[binding.role].ref(),
            "createTime": timestamp(binding.create_ms),
        }

    # -- repos ------------------------------------------------------------------------------------

    def repo(self, uid: str) -> Repo:
        repo = self.store.repos.get(uid)
        if repo is None:
            raise not_found(f"Not found: repo {uid}")
        return repo

    def create_repo(self, group_uid: str, name: str) -> Repo:
        """Repos have no create endpoint upstream: seed data, tests and ``tokenrelay dev`` use this."""
        self.group(group_uid)
        repo = Repo(self._new_uid(group_uid), name, self._now_ms())
        self.store.put(repo)
        return repo
