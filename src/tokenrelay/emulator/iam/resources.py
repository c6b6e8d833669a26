"""What every rules module shares: the store, the clock, new uids and look-ups that answer NOT_FOUND.

Each kind's rules (validation, PATCH, delete guards) live in a module of its own, named as its
table, one template for all: ``groups``, ``identities``, ``roles``, ``role_bindings``,
``identity_providers``, ``account_associations``, ``group_invites``, ``repos``, ``advisories``:
``KNOWN`` and ``UPDATABLE`` fields, then
``get``, ``create``, ``patch`` and ``delete`` as functions over ``Resources``. They are used by the
API handlers and by Python callers (``tokenrelay dev``, tests, benchmarks) alike, so a resource made
either way obeys the same rules. Every validation collects all failing fields before refusing.
Nothing that something else refers to disappears under it: a group with children, an identity or a
role named by role bindings (or a role offered by invites) is refused with code 9, naming what
still refers to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import not_found
from ..model import Record, new_child_uid, new_org_uid
from .store import Store

R = TypeVar("R", bound=Record)


def org_of(uid: str) -> str:
    """The organization holding ``uid``: its first segment."""
    return uid.partition("/")[0]


class Resources:
    """The store and the clock every rules module works with."""

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

    def find(self, kind: type[R], uid: str) -> R:
        """The stored record of ``kind``; NOT_FOUND naming the kind otherwise."""
        record = self.store.table(kind).get(uid)
        if record is None:
            raise not_found(f"Not found: {kind.label()} {uid}")
        return record
