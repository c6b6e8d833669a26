"""What every resource is, and its JSON derived from a declaration: the model the rooms share.

A resource is a ``Record`` (a slotted dataclass, ``uid`` first). Its JSON is declared on its class
as a ``Shape``, the wire fields in their order, each naming the attribute that holds it; ``shown``
makes the JSON from it, so a kind's record states its wire form once and no kind writes its own
rendering. The wire form of a value follows from the attribute: ``*_ms`` (integer milliseconds since
the epoch, the precision the wire has, so what is stored, sorted on and shown is the same number) is
an RFC 3339 timestamp, a tuple a sorted list, lists and objects copies. A dotted field nests
(``claimMatch.issuer``).

A uid is ``<parent_uid>/<segment>``; the uid of the group that holds a resource is therefore its uid
without the last segment.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..lite.timestamps import format_timestamp

ORG_SEGMENT_BYTES = 20  # an organization's uid: 40 hex digits, no slash
CHILD_SEGMENT_BYTES = 8  # every other segment: 16 hex digits

Shape = Mapping[str, str]  # wire field (dotted: inside an object) -> the attribute holding its value
HEAD: Shape = {"uid": "uid", "name": "name", "description": "description"}
TIMES: Shape = {"createTime": "create_ms", "updateTime": "update_ms"}


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


def _wire(attribute: str, value: Any) -> Any:
    if attribute.endswith("_ms"):
        return timestamp(value)
    if isinstance(value, tuple):
        return sorted(value)
    if isinstance(value, list):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def shown(record: object, shape: Shape) -> dict[str, Any]:
    """The JSON of ``record`` as ``shape`` declares it, fields in the shape's order."""
    body: dict[str, Any] = {}
    for field, attribute in shape.items():
        *outer, name = field.split(".")
        into = body
        for key in outer:
            into = into.setdefault(key, {})
        into[name] = _wire(attribute, getattr(record, attribute))
    return body


Writer = Literal["editor", "owner"] | None


@dataclass(slots=True)
class Record:
    """What every layer knows of a kind, declared on its class; ``uid`` is every record's first field."""

    KIND: ClassVar[str]  # its name in the state file and its gRPC messages: "role_binding"
    PLURAL: ClassVar[str]  # the API's collection: path segment, list key, a refused delete's wording
    IN_GROUP: ClassVar[bool] = True  # its uid extends a group's, so that group cannot be deleted first
    WRITER: ClassVar[Writer] = None  # the least built-in role that creates, updates and deletes it
    # Its v2beta1 JSON, and v1's for the kinds v1 lists. Not declared by the kinds shown with other
    # records in them (a role binding's identity, group and role), which their rules module renders.
    V2: ClassVar[Shape]
    V1: ClassVar[Shape]
    uid: str

    @classmethod
    def table(cls) -> str:
        """The ``Store`` attribute holding the kind, also its permissions' prefix: "role_bindings"."""
        return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", cls.PLURAL).lower()

    @classmethod
    def label(cls) -> str:
        """The kind in messages: "role binding"."""
        return cls.KIND.replace("_", " ")

    def v2_shape(self) -> Shape:
        """The shape of this record's v2beta1 JSON: ``V2`` unless the record's values decide it."""
        return self.V2

    def v2(self) -> dict[str, Any]:
        return shown(self, self.v2_shape())

    def v1(self) -> dict[str, Any]:
        return shown(self, self.V1)


@dataclass(slots=True)
class Named(Record):
    """A record with a name and a description: the first fields of its JSON."""

    REF: ClassVar[Shape] = HEAD  # how other resources show it (a role binding's ``group`` and ``role``)
    name: str
    description: str

    def ref(self) -> dict[str, Any]:
        return shown(self, self.REF)
