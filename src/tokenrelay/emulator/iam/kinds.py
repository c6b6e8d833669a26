"""The resource kinds: each one's record and, declared on it, its JSON (v2beta1 and v1); and ``RECORDS``.

A kind is one ``Record`` subclass registered in ``RECORDS``: the store, a group's delete guard and the
built-in roles read that list, and ``api.KINDS`` gives each kind its HTTP face (gRPC is derived
from HTTP), so there is no other list to extend. Its JSON is its ``V2`` (and ``V1``) shape, made by
``model.shown``; each kind's rules are the module of ``iam/`` named as its table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..model import HEAD, TIMES, Named, Record, Shape, Writer, parent_of


@dataclass(slots=True)
class Group(Named):
    KIND: ClassVar[str] = "group"
    PLURAL: ClassVar[str] = "groups"
    WRITER: ClassVar[Writer] = "editor"
    NO_LIMITS: ClassVar[dict[str, int]] = {}
    NO_LIMITS_V1: ClassVar[dict[str, int]] = {"clusters": 0, "idps": 0, "repositories": 0}
    V2: ClassVar[Shape] = {**HEAD, "resourceLimits": "NO_LIMITS", "verified": "verified", **TIMES}
    V1: ClassVar[Shape] = {
        "id": "uid",
        "name": "name",
        "description": "description",
        "resourceLimits": "NO_LIMITS_V1",
        "verified": "verified",
        "createdAt": "create_ms",
        "updatedAt": "update_ms",
    }
    verified: bool
    create_ms: int
    update_ms: int


@dataclass(slots=True)
class Identity(Named):
    KIND: ClassVar[str] = "identity"
    PLURAL: ClassVar[str] = "identities"
    WRITER: ClassVar[Writer] = "owner"
    V2: ClassVar[Shape] = {
        **HEAD,
        "lastSeenTime": "last_seen_ms",
        "claimMatch.issuer": "issuer",
        "claimMatch.subject": "subject",
        **TIMES,
    }
    REF: ClassVar[Shape] = {**HEAD, "subject": "subject", "issuer": "issuer"}
    issuer: str
    subject: str
    last_seen_ms: int
    create_ms: int
    update_ms: int


@dataclass(slots=True)
class Role(Named):
    """A built-in role (flat uid, no times) or a custom one (uid under its group)."""

    KIND: ClassVar[str] = "role"
    PLURAL: ClassVar[str] = "roles"
    WRITER: ClassVar[Writer] = "owner"
    BUILTIN_V2: ClassVar[Shape] = {**HEAD, "capabilities": "permissions"}
    V2: ClassVar[Shape] = {**BUILTIN_V2, **TIMES}
    permissions: tuple[str, ...]
    create_ms: int = 0
    update_ms: int = 0

    @property
    def builtin(self) -> bool:
        return "/" not in self.uid

    def v2_shape(self) -> Shape:
        return self.BUILTIN_V2 if self.builtin else self.V2


@dataclass(slots=True)
class RoleBinding(Record):
    """Shown with its identity, group and role hydrated: ``role_bindings.render``."""

    KIND: ClassVar[str] = "role_binding"
    PLURAL: ClassVar[str] = "roleBindings"
    WRITER: ClassVar[Writer] = "owner"
    identity: str  # uid
    role: str  # uid
    create_ms: int
    update_ms: int = 0  # 0 in state written before bindings could be updated: read as create_ms

    @property
    def group(self) -> str:
        return parent_of(self.uid)


@dataclass(slots=True)
class Repo(Record):
    KIND: ClassVar[str] = "repo"
    PLURAL: ClassVar[str] = "repos"
    V2: ClassVar[Shape] = {"uid": "uid", "name": "name", "createTime": "create_ms"}
    V1: ClassVar[Shape] = {"id": "uid", "name": "name", "createdAt": "create_ms"}
    name: str
    create_ms: int


@dataclass(slots=True)
class IdentityProvider(Named):
    """An OIDC issuer a group trusts: identities in the group and below may match its tokens."""

    KIND: ClassVar[str] = "identity_provider"
    PLURAL: ClassVar[str] = "identityProviders"
    WRITER: ClassVar[Writer] = "owner"
    V2: ClassVar[Shape] = {**HEAD, "oidc.issuer": "issuer", **TIMES}
    issuer: str
    create_ms: int
    update_ms: int


@dataclass(slots=True)
class AccountAssociation(Named):
    """A cloud account tied to a group: exactly one of ``amazon``, ``google``, ``azure``."""

    KIND: ClassVar[str] = "account_association"
    PLURAL: ClassVar[str] = "accountAssociations"
    WRITER: ClassVar[Writer] = "editor"
    provider: str  # "amazon", "google" or "azure"
    account: dict[str, str]
    create_ms: int
    update_ms: int

    def v2_shape(self) -> Shape:
        return {**HEAD, self.provider: "account", **TIMES}  # the field is named by the provider


@dataclass(slots=True)
class GroupInvite(Record):
    """An offer of a role in a group, accepted by whoever presents its code before ``expire_ms``.

    Shown with its role hydrated: ``group_invites.render``."""

    KIND: ClassVar[str] = "group_invite"
    PLURAL: ClassVar[str] = "groupInvites"
    WRITER: ClassVar[Writer] = "owner"
    role: str  # uid
    expire_ms: int
    single_use: bool
    code_sha256: str  # the code itself is shown once, in the create answer
    create_ms: int
    update_ms: int

    @property
    def group(self) -> str:
        return parent_of(self.uid)


@dataclass(slots=True)
class Advisory(Record):
    """A vulnerability advisory about a repo's images (read-only over the API; seeded)."""

    KIND: ClassVar[str] = "advisory"
    PLURAL: ClassVar[str] = "advisories"
    IN_GROUP: ClassVar[bool] = False  # it lives under a repo, which blocks the delete
    V2: ClassVar[Shape] = {
        "uid": "uid",
        "vulnerabilityId": "vulnerability_id",
        "aliases": "aliases",
        "package": "package",
        "severity": "severity",
        "status": "status",
        "fixedVersion": "fixed_version",
        "summary": "summary",
        **TIMES,
    }
    vulnerability_id: str
    aliases: list[str]
    package: str
    severity: str
    status: str
    fixed_version: str
    summary: str
    create_ms: int
    update_ms: int


# Every kind the store keeps. A refused group delete names the kinds still in the group in this order.
RECORDS: tuple[type[Record], ...] = (
    Repo,
    Group,
    Identity,
    RoleBinding,
    Role,
    IdentityProvider,
    AccountAssociation,
    GroupInvite,
    Advisory,
)
RECORD_TYPES: dict[str, type[Record]] = {cls.KIND: cls for cls in RECORDS}
