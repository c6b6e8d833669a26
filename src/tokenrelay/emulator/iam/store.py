"""Where the emulator keeps its resources: in memory, written through to SQLite with ``--state FILE``.

Reads are served from the in-memory tables only, so a list costs no database round trip; every
change is written to SQLite in the same call (one small transaction), so a restart with the same
``--state`` finds everything, signing keys included — tokens issued before the restart stay valid.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from typing import Any, TypeVar

from ..model import Record
from .kinds import (
    RECORD_TYPES,
    RECORDS,
    AccountAssociation,
    Advisory,
    Group,
    GroupInvite,
    Identity,
    IdentityProvider,
    Repo,
    Role,
    RoleBinding,
)

R = TypeVar("R", bound=Record)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS resources (
    kind TEXT NOT NULL, uid TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, uid)
);
CREATE TABLE IF NOT EXISTS keys (name TEXT PRIMARY KEY, pem BLOB NOT NULL);
"""


class Store:
    """The resource tables; ``path`` None keeps them in memory only."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        # one table per kind of kinds.RECORDS, named by its table(): typed here for the rules modules
        self.groups: dict[str, Group] = {}
        self.identities: dict[str, Identity] = {}
        self.role_bindings: dict[str, RoleBinding] = {}
        self.repos: dict[str, Repo] = {}
        self.roles: dict[str, Role] = {}  # custom roles only; the built-in ones live in access.ROLES
        self.identity_providers: dict[str, IdentityProvider] = {}
        self.account_associations: dict[str, AccountAssociation] = {}
        self.group_invites: dict[str, GroupInvite] = {}
        self.advisories: dict[str, Advisory] = {}
        # a kind without its attribute fails here, at start-up
        self._tables: dict[str, dict[str, Any]] = {cls.KIND: getattr(self, cls.table()) for cls in RECORDS}
        self._keys: dict[str, bytes] = {}
        # identity uid -> its bindings' uids: every API request checks access through this
        self._bindings_of: dict[str, set[str]] = {}
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = sqlite3.connect(path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._load(self._db)

    def table(self, kind: type[R]) -> dict[str, R]:
        """The records of ``kind`` by uid."""
        table: dict[str, R] = self._tables[kind.KIND]
        return table

    def _load(self, db: sqlite3.Connection) -> None:
        for kind, body in db.execute("SELECT kind, body FROM resources"):
            cls = RECORD_TYPES.get(kind)
            if cls is not None:
                record = cls(**json.loads(body))
                if isinstance(record, Role):
                    record.permissions = tuple(record.permissions)
                self._remember(record)
        self._keys = {name: bytes(pem) for name, pem in db.execute("SELECT name, pem FROM keys")}

    def _remember(self, record: Record) -> None:
        self.table(type(record))[record.uid] = record
        if isinstance(record, RoleBinding):
            self._bindings_of.setdefault(record.identity, set()).add(record.uid)

    def exists(self, uid: str) -> bool:
        """True when any resource has this uid (uids are unique across kinds)."""
        return any(uid in table for table in self._tables.values())

    def put(self, record: Record) -> None:
        """Add or replace a record."""
        self._remember(record)
        if self._db is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO resources (kind, uid, body) VALUES (?, ?, ?)",
                (record.KIND, record.uid, json.dumps(dataclasses.asdict(record))),
            )

    def remove(self, record: Record) -> None:
        self.table(type(record)).pop(record.uid, None)
        if isinstance(record, RoleBinding):
            self._bindings_of.get(record.identity, set()).discard(record.uid)
        if self._db is not None:
            self._db.execute("DELETE FROM resources WHERE kind = ? AND uid = ?", (record.KIND, record.uid))

    def bindings_of(self, identity_uid: str) -> Iterator[RoleBinding]:
        for uid in self._bindings_of.get(identity_uid, ()):
            yield self.role_bindings[uid]

    def key(self, name: str) -> bytes | None:
        """A stored private key (PEM), or None."""
        return self._keys.get(name)

    def put_key(self, name: str, pem: bytes) -> None:
        self._keys[name] = pem
        if self._db is not None:
            self._db.execute("INSERT OR REPLACE INTO keys (name, pem) VALUES (?, ?)", (name, pem))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
