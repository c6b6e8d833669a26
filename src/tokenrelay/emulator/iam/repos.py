"""Repos: read-only over the API (List and Get); made by a first push, seed data or ``Emulator.repo``."""

from __future__ import annotations

from . import groups
from .kinds import Repo
from .resources import Resources


def create(res: Resources, group_uid: str, name: str) -> Repo:
    """Repos have no create endpoint upstream: a push, seed data, tests and ``tokenrelay dev`` use this."""
    groups.get(res, group_uid)
    repo = Repo(res.new_uid(group_uid), name, res.now_ms())
    res.store.put(repo)
    return repo
