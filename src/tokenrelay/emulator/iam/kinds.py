"""The emulator's resources, their JSON shapes (v2beta1 and v1), and the list of their kinds.

A kind is one ``Record`` subclass registered in ``RECORDS``: the store, a group's delete guard and the
built-in roles read that list, and ``api.KINDS`` gives each kind its HTTP face (gRPC is derived
from HTTP), so there is no other list to extend.

Times are kept as integer milliseconds since the epoch: the wire form has millisecond precision, so
what is stored, sorted on and shown is the same number. A uid is ``<parent_uid>/<segment>``; the
uid of the group that holds a resource is therefore its uid without the last segment.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ...lite.timestamps import format_timestamp

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


Writer = Literal["editor", "owner"] | None


@dataclass(slots=True)
class Record:
    """What every layer knows of a kind, declared on its class; ``uid`` is every record's first field."""

    KIND: ClassVar[str]  # its name in the state file and its gRPC messages: "role_binding"
    PLURAL: ClassVar[str]  # the API's collection: path segment, list key, a refused delete's wording
    IN_GROUP: ClassVar[bool] = True  # its uid extends a group's, so that group cannot be deleted first
    WRITER: ClassVar[Writer] = None  # the least built-in role that creates, updates and deletes it
    uid: str

    @classmethod
    def table(cls) -> str:
        """The ``Store`` attribute holding the kind, also its permissions' prefix: "role_bindings"."""
        return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", cls.PLURAL).lower()

    @classmethod
    def label(cls) -> str:
        """The kind in messages: "role binding"."""
        return cls.KIND.replace("_", " ")


@dataclass(slots=True)
class Named(Record):
    """A record with a name and a description: the first fields of its JSON."""

    name: str
    description: str

    def head(self) -> dict[str, Any]:
        return {"uid": self.uid, "name": self.name, "description": self.description}

    def ref(self) -> dict[str, Any]:
        """How other resources show it (a role binding's ``group`` and ``role``)."""
        return self.head()


def times(create_ms: int, update_ms: int) -> dict[str, str]:
    return {"createTime": timestamp(create_ms), "updateTime": timestamp(update_ms)}


@dataclass(slots=True)
class Group(Named):
    KIND: ClassVar[str] = "group"
    PLURAL: ClassVar[str] = "groups"
    WRITER: ClassVar[Writer] = "editor"
    verified: bool
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            **self.head(),
            "resourceLimits": {},
            "verified": self.verified,
            **times(self.create_ms, self.update_ms),
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


@dataclass(slots=True)
class Identity(Named):
    KIND: ClassVar[str] = "identity"
    PLURAL: ClassVar[str] = "identities"
    WRITER: ClassVar[Writer] = "owner"
    issuer: str
    subject: str
    last_seen_ms: int
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            **self.head(),
            "lastSeenTime": timestamp(self.last_seen_ms),
            "claimMatch": {"issuer": self.issuer, "subject": self.subject},
            **times(self.create_ms, self.update_ms),
        }

    def ref(self) -> dict[str, Any]:
        return {
            **self.head(),
            "subject": self.subject,
            "issuer": self.issuer,
        }


@dataclass(slots=True)
class Role(Named):
    """A built-in role (flat uid, no times) or a custom one (uid under its group)."""

    KIND: ClassVar[str] = "role"
    PLURAL: ClassVar[str] = "roles"
    WRITER: ClassVar[Writer] = "owner"
    permissions: tuple[str, ...]
    create_ms: int = 0
    update_ms: int = 0

    @property
    def builtin(self) -> bool:
        return "/" not in self.uid

    def v2(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            **self.head(),
            "capabilities": sorted(self.permissions),
        }
        if not self.builtin:
            body.update(times(self.create_ms, self.update_ms))
        return body


@dataclass(slots=True)
class RoleBinding(Record):
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
    name: str
    create_ms: int

    def v2(self) -> dict[str, Any]:
        return {"uid": self.uid, "name": self.name, "createTime": timestamp(self.create_ms)}

    def v1(self) -> dict[str, Any]:
        return {"id": self.uid, "name": self.name, "createdAt": timestamp(self.create_ms)}


@dataclass(slots=True)
class IdentityProvider(Named):
    """An OIDC issuer a group trusts: identities in the group and below may match its tokens."""

    KIND: ClassVar[str] = "identity_provider"
    PLURAL: ClassVar[str] = "identityProviders"
    WRITER: ClassVar[Writer] = "owner"
    issuer: str
    create_ms: int
    update_ms: int

    def v2(self) -> dict[str, Any]:
        return {
            **self.head(),
            "oidc": {"issuer": self.issuer},
            **times(self.create_ms, self.update_ms),
        }


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

    def v2(self) -> dict[str, Any]:
        return {
            **self.head(),
            self.provider: dict(self.account),
            **times(self.create_ms, self.update_ms),
        }


@dataclass(slots=True)
class GroupInvite(Record):
    """An offer of a role in a group, accepted by whoever presents its code before ``expire_ms``."""

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
            **times(self.create_ms, self.update_ms),
        }


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
