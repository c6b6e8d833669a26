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
from typing import Any

from .model import (
    RECORD_TYPES,
    AccountAssociation,
    Advisory,
    Group,
    GroupInvite,
    Identity,
    IdentityProvider,
    Record,
    Repo,
    Role,
    RoleBinding,
)

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
        self.groups: dict[str, Group] = {}
        self.identities: dict[str, Identity] = {}
        self.bindings: dict[str, RoleBinding] = {}
        self.repos: dict[str, Repo] = {}
        self.roles: dict[str, Role] = {}  # custom roles only; the built-in ones live in access.ROLES
        self.providers: dict[str, IdentityProvider] = {}
        self.associations: dict[str, AccountAssociation] = {}
        self.invites: dict[str, GroupInvite] = {}
        self.advisories: dict[str, Advisory] = {}
        self._tables: dict[str, dict[str, Any]] = {
            Group.KIND: self.groups,
            Identity.KIND: self.identities,
            RoleBinding.KIND: self.bindings,
            Repo.KIND: self.repos,
            Role.KIND: self.roles,
            IdentityProvider.KIND: self.providers,
            AccountAssociation.KIND: self.associations,
            GroupInvite.KIND: self.invites,
            Advisory.KIND: self.advisories,
        }
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

    def _table(self, kind: str) -> dict[str, Any]:
        return self._tables[kind]

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
        self._table(record.KIND)[record.uid] = record
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
        self._table(record.KIND).pop(record.uid, None)
        if isinstance(record, RoleBinding):
            self._bindings_of.get(record.identity, set()).discard(record.uid)
        if self._db is not None:
            self._db.execute("DELETE FROM resources WHERE kind = ? AND uid = ?", (record.KIND, record.uid))

    def bindings_of(self, identity_uid: str) -> Iterator[RoleBinding]:
        for uid in self._bindings_of.get(identity_uid, ()):
            yield self.bindings[uid]

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
