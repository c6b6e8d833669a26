"""The emulator's resources and their JSON shapes (v2beta1 and v1).

Times are kept as integer milliseconds since the epoch: the wire form has millisecond precision, so
what is stored, sorted on and shown is the same number. A uid is ``<parent_uid>/<segment>``; the
uid of the group that holds a resource is therefore its uid without the last segment.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, ClassVar

from ..lite.timestamps import format_timestamp

ORG_SEGMENT_BYTES = 20  # an organization's uid: 40 hex digits, no slash
CHILD_SEGMENT_BYTES = 8  # every other segment: 16 hex digits


def timestamp(ms: int) -> str:
    return format_timestamp(ms / 1000)


def parent_of(uid: str) -> str:
    """The uid of the group holding ``uid`` ("" for an organization)."""
    return uid.rpartition("/")[0]


def is_within(uid: str, ancestor: str) -> bool:
    """True when ``uid`` is ``ancestor`` itself or lies below it."""
    return uid == ancestor or uid.startswith(ancestor + "/")


def new_org_uid() -> str:
    return secrets.token_hex(ORG_SEGMENT_BYTES)


def new_child_uid(parent: str) -> str:
    return f"{parent}/{secrets.token_hex(CHILD_SEGMENT_BYTES)}"


def role_uid(name: str) -> str:
    """Built-in roles have a flat hex uid, stable across restarts."""
    return hashlib.sha1(f"tokenrelay-emulator/role/{name}".encode(), usedforsecurity=False).hexdigest()


@dataclass(slots=True)
class Group:
    KIND: ClassVar[str] = "group"
    uid: str
    name: str
    description: str
    verified: bool
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "name": self.name,
            "description": self.description,
            "resourceLimits": {},
            "verified": self.verified,
            "createTime": timestamp(self.create_ms),
            "updateTime": timestamp(self.update_ms),
        }

    def v1(self) -> dict[str, Any]:
        return {
            "id": self.uid,
            "name": self.name,
            "description": self.description,
            "resourceLimits": {"clusters": 0, "idps": 0, "repositories": 0},
            "verified": self.verified,
            "createdAt": timestamp(self.create_ms),
            "updatedAt": timestamp(self.update_ms),
        }

    def ref(self) -> dict[str, Any]:
        return {"uid": self.uid, "name": self.name, "description": self.description}


@dataclass(slots=True)
class Identity:
    KIND: ClassVar[str] = "identity"
    uid: str
    name: str
    description: str
    issuer: str
    subject: str
    last_seen_ms: int
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "name": self.name,
            "description": self.description,
            "lastSeenTime": timestamp(self.last_seen_ms),
            "claimMatch": {"issuer": self.issuer, "subject": self.subject},
            "createTime": timestamp(self.create_ms),
            "updateTime": timestamp(self.update_ms),
        }

    def ref(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "name": self.name,
            "description": self.description,
            "subject": self.subject,
            "issuer": self.issuer,
        }


@dataclass(slots=True)
class Role:
    """A built-in role (flat uid, no times) or a custom one (uid under its group)."""

    KIND: ClassVar[str] = "role"
    uid: str
    name: str
    description: str
    permissions: tuple[str, ...]
    create_ms: int = 0
    update_ms: int = 0

    @property
    def builtin(self) -> bool:
        return "/" not in self.uid

    def v2(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "uid": self.uid,
            "name": self.name,
            "description": self.description,
            "capabilities": sorted(self.permissions),
        }
        if not self.builtin:
            body["createTime"] = timestamp(self.create_ms)
            body["updateTime"] = timestamp(self.update_ms)
        return body

    def ref(self) -> dict[str, Any]:
        return {"uid": self.uid, "name": self.name, "description": self.description}


@dataclass(slots=True)
class RoleBinding:
    KIND: ClassVar[str] = "role_binding"
    uid: str
    identity: str  # uid
    role: str  # uid
    create_ms: int
    update_ms: int = 0  # 0 in state written before bindings could be updated: read as create_ms

    @property
    def group(self) -> str:
        return parent_of(self.uid)


@dataclass(slots=True)
class Repo:
    KIND: ClassVar[str] = "repo"
    uid: str
    name: str
    create_ms: int

    def v2(self) -> dict[str, Any]:
        return {"uid": self.uid, "name": self.name, "createTime": timestamp(self.create_ms)}

    def v1(self) -> dict[str, Any]:
        return {"id": self.uid, "name": self.name, "createdAt": timestamp(self.create_ms)}


@dataclass(slots=True)
class IdentityProvider:
    """An OIDC issuer a group trusts: identities in the group and below may match its tokens."""

    KIND: ClassVar[str] = "identity_provider"
    uid: str
    name: str
    description: str
    issuer: str
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "name": self.name,
            "description": self.description,
            "oidc": {"issuer": self.issuer},
            "createTime": timestamp(self.create_ms),
            "updateTime": timestamp(self.update_ms),
        }


@dataclass(slots=True)
class AccountAssociation:
    """A cloud account tied to a group: exactly one of ``amazon``, ``google``, ``azure``."""

    KIND: ClassVar[str] = "account_association"
    uid: str
    name: str
    description: str
    provider: str  # "amazon", "google" or "azure"
    account: dict[str, str]
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "name": self.name,
            "description": self.description,
            self.provider: dict(self.account),
            "createTime": timestamp(self.create_ms),
            "updateTime": timestamp(self.update_ms),
        }


@dataclass(slots=True)
class GroupInvite:
    """An offer of a role in a group, accepted by whoever presents its code before ``expire_ms``."""

    KIND: ClassVar[str] = "group_invite"
    uid: str
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
class Advisory:
    """A vulnerability advisory about a repo's images (read-only over the API; seeded)."""

    KIND: ClassVar[str] = "advisory"
    uid: str
    vulnerability_id: str
    aliases: list[str]
    package: str
    severity: str
    status: str
    fixed_version: str
    summary: str
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "vulnerabilityId": self.vulnerability_id,
            "aliases": list(self.aliases),
            "package": self.package,
            "severity": self.severity,
            "status": self.status,
            "fixedVersion": self.fixed_version,
            "summary": self.summary,
            "createTime": timestamp(self.create_ms),
            "updateTime": timestamp(self.update_ms),
        }


Record = (
    Group
    | Identity
    | Role
    | RoleBinding
    | Repo
    | IdentityProvider
    | AccountAssociation
    | GroupInvite
    | Advisory
)
RECORD_TYPES: dict[str, type[Record]] = {
    cls.KIND: cls
    for cls in (
        Group,
        Identity,
        Role,
        RoleBinding,
        Repo,
        IdentityProvider,
        AccountAssociation,
        GroupInvite,
        Advisory,
    )
}
