"""The document's rules on IAM resources, apart from HTTP: validation, PATCH, delete guards.

Used by the API handlers and by Python callers (``tokenrelay dev``, tests, benchmarks) alike, so a
resource made either way obeys the same rules. Every validation collects all failing fields before
refusing. Nothing that something else refers to disappears under it: a group with children, an
identity or a role named by role bindings (or a role offered by invites) is refused with code 9,
naming what still refers to it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from . import access
from .errors import (
    IAM_DOMAIN,
    already_exists,
    failed_precondition,
    in_use,
    not_empty,
    not_found,
    permission_denied,
)
from .inputs import MAX_NAME, Fields
from .model import (
    AccountAssociation,
    Group,
    GroupInvite,
    Identity,
    IdentityProvider,
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
INVITE_DEFAULT_TTL_MS = 7 * 86400 * 1000
INVITE_MAX_TTL_MS = 30 * 86400 * 1000
_AWS_ACCOUNT = re.compile(r"[0-9]{12}")
_GCP_PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_GCP_PROJECT_NUMBER = re.compile(r"[0-9]{1,20}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ACCOUNT_PROVIDERS: dict[str, dict[str, tuple[re.Pattern[str], str, bool]]] = {
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

# Per kind: the fields a body may name (input and output forms), and those PATCH may change.
GROUP_KNOWN = ("name", "description", "uid", "resourceLimits", "verified", "createTime", "updateTime")
GROUP_UPDATABLE = ("name", "description")
IDENTITY_KNOWN = ("name", "description", "claimMatch", "uid", "lastSeenTime", "createTime", "updateTime")
IDENTITY_UPDATABLE = ("name", "description", "claimMatch", "claimMatch.issuer", "claimMatch.subject")
ROLE_KNOWN = ("name", "description", "capabilities", "uid", "createTime", "updateTime")
ROLE_UPDATABLE = ("name", "description", "capabilities")
BINDING_KNOWN = ("identityUid", "roleUid", "uid", "identity", "group", "role", "createTime", "updateTime")
BINDING_UPDATABLE = ("roleUid",)
PROVIDER_KNOWN = ("name", "description", "oidc", "uid", "createTime", "updateTime")
PROVIDER_UPDATABLE = ("name", "description", "oidc", "oidc.issuer")
ASSOCIATION_KNOWN = ("name", "description", *ACCOUNT_PROVIDERS, "uid", "createTime", "updateTime")
ASSOCIATION_UPDATABLE = (
    "name",
    "description",
    *ACCOUNT_PROVIDERS,
    *(f"{p}.{f}" for p, fields in ACCOUNT_PROVIDERS.items() for f in fields),
)
INVITE_KNOWN = ("roleUid", "expireTime", "singleUse", "uid", "role", "code", "createTime", "updateTime")
INVITE_UPDATABLE = ("expireTime", "singleUse")


def org_of(uid: str) -> str:
    return uid.partition("/")[0]


def code_digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


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

    def _find(self, table: Mapping[str, R], label: str, uid: str) -> R:
        record = table.get(uid)
        if record is None:
            raise not_found(f"Not found: {label} {uid}")
        return record

    def _children(self, table: Mapping[str, Any], group_uid: str) -> list[str]:
        return sorted(uid for uid in table if parent_of(uid) == group_uid)

    def _patch(
        self,
        current: dict[str, Any],
        body: Mapping[str, Any],
        mask: str | None,
        updatable: tuple[str, ...],
        known: tuple[str, ...],
    ) -> tuple[dict[str, Any], bool, Violations]:
        return merge(current, body, mask, updatable, known)

    # -- groups -----------------------------------------------------------------------------------

    def group(self, uid: str) -> Group:
        return self._find(self.store.groups, "group", uid)

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
        merged, changed, violations = self._patch(current, body, update_mask, GROUP_UPDATABLE, GROUP_KNOWN)
        name, description = self._group_fields(merged, violations)
        if changed:
            group.name, group.description, group.update_ms = name, description, self.now_ms()
            self.store.put(group)
        return group

    def delete_group(self, uid: str) -> None:
        """Refused with FAILED_PRECONDITION while anything lives in the group, role bindings included."""
        self.group(uid)
        kinds: dict[str, Mapping[str, Any]] = {
            "repos": self.store.repos,
            "groups": self.store.groups,
            "identities": self.store.identities,
            "roleBindings": self.store.bindings,
            "roles": self.store.roles,
            "identityProviders": self.store.providers,
            "accountAssociations": self.store.associations,
            "groupInvites": self.store.invites,
        }
        children = {kind: self._children(table, uid) for kind, table in kinds.items()}
        blocking = {kind: uids for kind, uids in children.items() if uids}
        if blocking:
            raise not_empty(uid, blocking)
        self.store.remove(self.store.groups[uid])

    # -- identities -------------------------------------------------------------------------------

    def identity(self, uid: str) -> Identity:
        return self._find(self.store.identities, "identity", uid)

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
        merged, changed, violations = self._patch(
            current, body, update_mask, IDENTITY_UPDATABLE, IDENTITY_KNOWN
        )
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

    def trusted_issuers(self, identity_uid: str) -> frozenset[str]:
        """Issuers of the identity providers of the identity's group and its ancestors."""
        group = parent_of(identity_uid)
        return frozenset(
            p.issuer.rstrip("/") for p in self.store.providers.values() if is_within(group, parent_of(p.uid))
        )

    # -- roles ------------------------------------------------------------------------------------

    def role(self, uid: str) -> Role:
        found = access.role(self.store, uid)
        if found is None:
            raise not_found(f"Not found: role {uid}")
        return found

    def _role_fields(
        self, body: Mapping[str, Any], violations: Violations
    ) -> tuple[str, str, tuple[str, ...]]:
        fields = Fields(body, ROLE_KNOWN, IAM_DOMAIN, violations=violations)
        name, description = fields.name(), fields.text("description")
        capabilities = fields.strings("capabilities")
        if "capabilities" not in body or (not capabilities and isinstance(body.get("capabilities"), list)):
            fields.add("capabilities", "required: at least one permission, e.g. groups.list")
        for index, capability in enumerate(capabilities):
            if capability not in access.PERMISSIONS:
                fields.add(f"capabilities[{index}]", f"{capability!r} is not a permission (see GET roles)")
        fields.check()
        return name, description, tuple(sorted(set(capabilities)))

    def create_role(self, group_uid: str, body: Mapping[str, Any]) -> Role:
        self.group(group_uid)
        name, description, capabilities = self._role_fields(body, [])
        now = self.now_ms()
        role = Role(self.new_uid(group_uid), name, description, capabilities, now, now)
        self.store.put(role)
        return role

    def _custom(self, uid: str) -> Role:
        role = self.role(uid)
        if role.builtin:
            raise permission_denied(f"Permission denied: the built-in role {role.name} cannot be changed")
        return role

    def patch_role(self, uid: str, body: Mapping[str, Any], update_mask: str | None) -> Role:
        role = self._custom(uid)
        current = {"name": role.name, "description": role.description, "capabilities": list(role.permissions)}
        merged, changed, violations = self._patch(current, body, update_mask, ROLE_UPDATABLE, ROLE_KNOWN)
        name, description, capabilities = self._role_fields(merged, violations)
        if changed:
            role.name, role.description, role.permissions = name, description, capabilities
            role.update_ms = self.now_ms()
            self.store.put(role)
        return role

    def delete_role(self, uid: str) -> None:
        """Refused with FAILED_PRECONDITION while role bindings or group invites name the role."""
        role = self._custom(uid)
        users = {
            "roleBindings": sorted(b.uid for b in self.store.bindings.values() if b.role == uid),
            "groupInvites": sorted(i.uid for i in self.store.invites.values() if i.role == uid),
        }
        if any(users.values()):
            raise in_use("role", uid, {kind: uids for kind, uids in users.items() if uids})
        self.store.remove(role)

    def _usable_role(self, role_uid: str, group_uid: str, field: str, violations: Violations) -> None:
        """A custom role is usable in the group that defines it and below; built-ins everywhere."""
        role = access.role(self.store, role_uid)
        if role is not None and not role.builtin and not is_within(group_uid, parent_of(role.uid)):
            violations.append(
                (field, f"role {role_uid} is defined in group {parent_of(role.uid)}: bind it there or below")
            )

    # -- role bindings ----------------------------------------------------------------------------

    def binding(self, uid: str) -> RoleBinding:
        return self._find(self.store.bindings, "role binding", uid)

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
        self._usable_role(role_uid, group_uid, "roleUid", fields.violations)
        fields.check()
        return self._bind(group_uid, identity_uid, role_uid)

    def _bind(self, group_uid: str, identity_uid: str, role_uid: str) -> RoleBinding:
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
        merged, changed, violations = self._patch(
            {"roleUid": binding.role}, body, update_mask, BINDING_UPDATABLE, BINDING_KNOWN
        )
        fields = Fields(merged, BINDING_KNOWN, IAM_DOMAIN, violations=violations)
        role_uid = fields.text("roleUid", required=True, limit=MAX_SUBJECT)
        fields.check()
        self.role(role_uid)
        self._usable_role(role_uid, binding.group, "roleUid", fields.violations)
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

    # -- identity providers -----------------------------------------------------------------------

    def provider(self, uid: str) -> IdentityProvider:
        return self._find(self.store.providers, "identity provider", uid)

    def _provider_fields(self, body: Mapping[str, Any], violations: Violations) -> tuple[str, str, str]:
        fields = Fields(body, PROVIDER_KNOWN, IAM_DOMAIN, violations=violations)
        name = fields.text("name", required=True, limit=MAX_NAME)
        description = fields.text("description")
        oidc = fields.nested("oidc", ("issuer",), required=True)
        issuer = oidc.url("issuer", "the issuer URL of the OIDC tokens to trust") if oidc is not None else ""
        fields.check()
        return name, description, issuer

    def create_provider(self, group_uid: str, body: Mapping[str, Any]) -> IdentityProvider:
        self.group(group_uid)
        name, description, issuer = self._provider_fields(body, [])
        now = self.now_ms()
        provider = IdentityProvider(self.new_uid(group_uid), name, description, issuer, now, now)
        self.store.put(provider)
        return provider

    def patch_provider(self, uid: str, body: Mapping[str, Any], update_mask: str | None) -> IdentityProvider:
        provider = self.provider(uid)
        current = {
            "name": provider.name,
            "description": provider.description,
            "oidc": {"issuer": provider.issuer},
        }
        merged, changed, violations = self._patch(
            current, body, update_mask, PROVIDER_UPDATABLE, PROVIDER_KNOWN
        )
        name, description, issuer = self._provider_fields(merged, violations)
        if changed:
            provider.name, provider.description, provider.issuer = name, description, issuer
            provider.update_ms = self.now_ms()
            self.store.put(provider)
        return provider

    def delete_provider(self, uid: str) -> None:
        self.store.remove(self.provider(uid))

    # -- account associations ---------------------------------------------------------------------

    def association(self, uid: str) -> AccountAssociation:
        return self._find(self.store.associations, "account association", uid)

    def _association_fields(
        self, body: Mapping[str, Any], violations: Violations
    ) -> tuple[str, str, str, dict[str, str]]:
        fields = Fields(body, ASSOCIATION_KNOWN, IAM_DOMAIN, violations=violations)
        name = fields.text("name", limit=MAX_NAME)
        description = fields.text("description")
        present = [p for p in ACCOUNT_PROVIDERS if body.get(p) is not None]
        provider, account = "", {}
        if len(present) != 1:
            fields.add(present[1] if present else "amazon", "give exactly one of amazon, google, azure")
        for name_ in present:
            checks = ACCOUNT_PROVIDERS[name_]
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

    def create_association(self, group_uid: str, body: Mapping[str, Any]) -> AccountAssociation:
        self.group(group_uid)
        name, description, provider, account = self._association_fields(body, [])
        now = self.now_ms()
        association = AccountAssociation(
            self.new_uid(group_uid), name, description, provider, account, now, now
        )
        self.store.put(association)
        return association

    def patch_association(
        self, uid: str, body: Mapping[str, Any], update_mask: str | None
    ) -> AccountAssociation:
        association = self.association(uid)
        current = {
            "name": association.name,
            "description": association.description,
            association.provider: dict(association.account),
        }
        if update_mask is None:
            # Naming another provider replaces the account: the old one is cleared, not merged in.
            named = [p for p in ACCOUNT_PROVIDERS if p in body and p != association.provider]
            if named:
                current.pop(association.provider)
        merged, changed, violations = self._patch(
            current, body, update_mask, ASSOCIATION_UPDATABLE, ASSOCIATION_KNOWN
        )
        name, description, provider, account = self._association_fields(merged, violations)
        if changed:
            association.name, association.description = name, description
            association.provider, association.account = provider, account
            association.update_ms = self.now_ms()
            self.store.put(association)
        return association

    def delete_association(self, uid: str) -> None:
        self.store.remove(self.association(uid))

    # -- group invites ----------------------------------------------------------------------------

    def invite(self, uid: str) -> GroupInvite:
        return self._find(self.store.invites, "group invite", uid)

    def _invite_fields(
        self, group_uid: str, body: Mapping[str, Any], violations: Violations, *, kept: GroupInvite | None
    ) -> tuple[str, int, bool]:
        """``kept``: the invite a PATCH changes (its role stays; an unchanged expiry is not re-checked)."""
        fields = Fields(body, INVITE_KNOWN, IAM_DOMAIN, violations=violations)
        now = self.now_ms()
        role_uid = kept.role if kept else fields.text("roleUid", required=True, limit=MAX_SUBJECT)
        if kept is None and role_uid:
            if access.role(self.store, role_uid) is None:
                fields.add("roleUid", f"no role {role_uid}")
            self._usable_role(role_uid, group_uid, "roleUid", fields.violations)
        if kept is not None and body.get("expireTime") == timestamp(kept.expire_ms):
            expire_ms: int | None = kept.expire_ms
        elif "expireTime" not in body:
            expire_ms = now + INVITE_DEFAULT_TTL_MS
            if kept is not None:
                fields.add("expireTime", "required: an invite cannot lose its expiry")
        else:
            expire_ms = fields.timestamp_ms("expireTime")
            if expire_ms is not None and not now < expire_ms <= now + INVITE_MAX_TTL_MS:
                fields.add("expireTime", "must be in the future and at most 30 days ahead")
        single_use = fields.boolean("singleUse", True)
        fields.check()
        return role_uid, expire_ms or now, single_use

    def create_invite(self, group_uid: str, body: Mapping[str, Any]) -> tuple[GroupInvite, str]:
        """The invite and its code (shown once: only its digest is kept)."""
        self.group(group_uid)
        role_uid, expire_ms, single_use = self._invite_fields(group_uid, body, [], kept=None)
        code = secrets.token_urlsafe(24)
        now = self.now_ms()
        invite = GroupInvite(
            self.new_uid(group_uid), role_uid, expire_ms, single_use, code_digest(code), now, now
        )
        self.store.put(invite)
        return invite, code

    def patch_invite(self, uid: str, body: Mapping[str, Any], update_mask: str | None) -> GroupInvite:
        invite = self.invite(uid)
        current: dict[str, Any] = {"expireTime": timestamp(invite.expire_ms), "singleUse": invite.single_use}
        merged, changed, violations = self._patch(current, body, update_mask, INVITE_UPDATABLE, INVITE_KNOWN)
        _, expire_ms, single_use = self._invite_fields(invite.group, merged, violations, kept=invite)
        if changed:
            invite.expire_ms, invite.single_use, invite.update_ms = expire_ms, single_use, self.now_ms()
            self.store.put(invite)
        return invite

    def delete_invite(self, uid: str) -> None:
        self.store.remove(self.invite(uid))

    def accept_invite(self, uid: str, body: Mapping[str, Any], identity_uid: str) -> RoleBinding:
        """Binds ``identity_uid`` (of any organization) to the invite's role on its group."""
        invite = self.invite(uid)
        fields = Fields(body, ("code",), IAM_DOMAIN)
        code = fields.text("code", required=True, limit=256)
        fields.check()
        if not hmac.compare_digest(code_digest(code), invite.code_sha256):
            raise permission_denied(f"Permission denied: the code does not open group invite {uid}")
        if invite.expire_ms <= self.now_ms():
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
        self.identity(identity_uid)
        binding = self._bind(invite.group, identity_uid, invite.role)
        if invite.single_use:
            self.store.remove(invite)
        return binding

    def render_invite(self, invite: GroupInvite) -> dict[str, Any]:
        return {
            "uid": invite.uid,
            "role": self.role(invite.role).ref(),
            "expireTime": timestamp(invite.expire_ms),
            "singleUse": invite.single_use,
            "createTime": timestamp(invite.create_ms),
            "updateTime": timestamp(invite.update_ms),
        }

    # -- repos ------------------------------------------------------------------------------------

    def repo(self, uid: str) -> Repo:
        return self._find(self.store.repos, "repo", uid)

    def create_repo(self, group_uid: str, name: str) -> Repo:
        """Repos have no create endpoint upstream: seed data, tests and ``tokenrelay dev`` use this."""
        self.group(group_uid)
        repo = Repo(self.new_uid(group_uid), name, self.now_ms())
        self.store.put(repo)
        return repo
