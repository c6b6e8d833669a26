"""What each repository holds: its blobs (links into the content store), its manifests and its tags.

The same pattern as the emulator's ``Store``: reads from memory, every change written through to
SQLite (tables ``registry_*`` in the ``--state`` file, on a connection of its own) so a restart finds
the same tags. A tag is also an API resource (``/registry/v2beta1/tags``): its uid is its repo's uid,
``/``, and its name, and ``digest``, ``mediaType`` and ``size`` are the OCI descriptor of the manifest
it points at.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from ..model import TIMES, Record, Shape

_SCHEMA = """
CREATE TABLE IF NOT EXISTS registry_links (repo TEXT NOT NULL, digest TEXT NOT NULL,
    PRIMARY KEY (repo, digest));
CREATE TABLE IF NOT EXISTS registry_manifests (repo TEXT NOT NULL, digest TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (repo, digest));
CREATE TABLE IF NOT EXISTS registry_tags (uid TEXT PRIMARY KEY, body TEXT NOT NULL);
"""


@dataclass(slots=True)
class Manifest:
    digest: str
    media_type: str
    size: int
    create_ms: int


@dataclass(slots=True)
class Tag(Record):
    """An API kind kept here, not in the store (nor in ``iam.kinds.RECORDS``); uid: <repo uid>/<name>."""

    KIND: ClassVar[str] = "tag"
    PLURAL: ClassVar[str] = "tags"
    V2: ClassVar[Shape] = {
        "uid": "uid",
        "name": "name",
        "digest": "digest",
        "mediaType": "media_type",
        "size": "size_text",
        **TIMES,
    }
    name: str
    digest: str
    media_type: str
    size: int
    create_ms: int
    update_ms: int

    @property
    def repo(self) -> str:
        return self.uid[: -len(self.name) - 1]

    @property
    def size_text(self) -> str:
        return str(self.size)  # int64 as a string, as the document writes totalCount


class Catalog:
    """Links, manifests and tags per repository uid; ``path`` None keeps them in memory only."""

    def __init__(self, path: str | None = None, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self.tags: dict[str, Tag] = {}  # uid -> tag
        self._links: dict[str, set[str]] = {}
        self._manifests: dict[str, dict[str, Manifest]] = {}
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = sqlite3.connect(path, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            self._load(self._db)

    def _load(self, db: sqlite3.Connection) -> None:
        for repo, digest in db.execute("SELECT repo, digest FROM registry_links"):
            self._links.setdefault(repo, set()).add(digest)
        for repo, digest, body in db.execute("SELECT repo, digest, body FROM registry_manifests"):
            self._manifests.setdefault(repo, {})[digest] = Manifest(**json.loads(body))
        for uid, body in db.execute("SELECT uid, body FROM registry_tags"):
            self.tags[uid] = Tag(**json.loads(body))

    def _write(self, sql: str, *args: Any) -> None:
        if self._db is not None:
            self._db.execute(sql, args)

    def _now_ms(self) -> int:
        return int(self._wall() * 1000)

    # -- blobs ------------------------------------------------------------------------------------

    def linked(self, repo: str, digest: str) -> bool:
        return digest in self._links.get(repo, ())

    def link(self, repo: str, digest: str) -> None:
        links = self._links.setdefault(repo, set())
        if digest not in links:
            links.add(digest)
            self._write("INSERT OR IGNORE INTO registry_links (repo, digest) VALUES (?, ?)", repo, digest)

    def unlink(self, repo: str, digest: str) -> bool:
        links = self._links.get(repo, set())
        if digest not in links:
            return False
        links.discard(digest)
        self._write("DELETE FROM registry_links WHERE repo = ? AND digest = ?", repo, digest)
        return True

    # -- manifests --------------------------------------------------------------------------------

    def manifest(self, repo: str, digest: str) -> Manifest | None:
        return self._manifests.get(repo, {}).get(digest)

    def put_manifest(self, repo: str, digest: str, media_type: str, size: int) -> Manifest:
        existing = self.manifest(repo, digest)
        if existing is not None and existing.media_type == media_type:
            return existing
        manifest = Manifest(digest, media_type, size, self._now_ms())
        self._manifests.setdefault(repo, {})[digest] = manifest
        self._write(
            "INSERT OR REPLACE INTO registry_manifests (repo, digest, body) VALUES (?, ?, ?)",
            repo,
            digest,
            json.dumps(dataclasses.asdict(manifest)),
        )
        return manifest

    def remove_manifest(self, repo: str, digest: str) -> list[str]:
        """Forget the manifest and every tag pointing at it; the names of those tags."""
        self._manifests.get(repo, {}).pop(digest, None)
        self._write("DELETE FROM registry_manifests WHERE repo = ? AND digest = ?", repo, digest)
        gone = [tag for tag in self.tags_of(repo) if tag.digest == digest]
        for tag in gone:
            self.remove_tag(tag)
        return [tag.name for tag in gone]

    # -- tags -------------------------------------------------------------------------------------

    def tag(self, repo: str, name: str) -> Tag | None:
        return self.tags.get(f"{repo}/{name}")

    def tags_of(self, repo: str) -> Iterator[Tag]:
        prefix = repo + "/"
        return (
            tag for uid, tag in self.tags.items() if uid.startswith(prefix) and "/" not in uid[len(prefix) :]
        )

    def set_tag(self, repo: str, name: str, manifest: Manifest) -> Tag:
        """Point ``name`` at ``manifest``; ``updateTime`` moves only when the target changes."""
        now = self._now_ms()
        tag = self.tag(repo, name)
        if tag is None:
            tag = Tag(f"{repo}/{name}", name, manifest.digest, manifest.media_type, manifest.size, now, now)
        elif (tag.digest, tag.media_type) != (manifest.digest, manifest.media_type):
            tag.digest, tag.media_type, tag.size, tag.update_ms = (
                manifest.digest,
                manifest.media_type,
                manifest.size,
                now,
            )
        else:
            return tag
        self.tags[tag.uid] = tag
        self._write(
            "INSERT OR REPLACE INTO registry_tags (uid, body) VALUES (?, ?)",
            tag.uid,
            json.dumps(dataclasses.asdict(tag)),
        )
        return tag

    def remove_tag(self, tag: Tag) -> None:
        self.tags.pop(tag.uid, None)
        self._write("DELETE FROM registry_tags WHERE uid = ?", tag.uid)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
