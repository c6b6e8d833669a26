"""The registry behind the emulator's Registry domain: names, rights, content and tags, composed.

``Registry`` answers the questions the HTTP layer asks: which repo an image name means (the
organization by name, then the repo by name anywhere below it), what an identity may do there (pull:
``repos.pull``, viewer or better; push and delete: ``repos.push``, editor or better; checked on the
repo's group, or on the organization's root group for a name not yet pushed), and where a new name
goes (a repo under the organization's root group). Its Python face, ``push``, puts an image in
without HTTP (``tokenrelay dev``'s seed image, tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..iam import access, repos
from ..iam.kinds import Group, Repo
from ..iam.resources import Resources
from ..iam.store import Store
from ..model import is_within, parent_of
from ..sts.issuer import SigningKey
from .blobs import Blobs, Limits, Upload
from .catalog import Catalog, Tag
from .errors import RegistryError
from .image import Image
from .names import ImageName
from .regtoken import TOKEN_PATH, RegistryTokens

PULL_ROLE, PUSH_ROLE = "viewer", "editor"  # the least role granting each, named in refusals


def blob_directory(state_path: str | None) -> str | None:
    """Where content goes with ``--state FILE``: the directory ``FILE.blobs`` beside it."""
    return None if state_path is None else str(Path(state_path).with_name(Path(state_path).name + ".blobs"))


@dataclass(slots=True)
class Session:
    """An upload in progress, bound to the repo it was started for."""

    upload: Upload
    repo: str  # uid
    touched: float  # monotonic time of the last request
    busy: bool = False  # a request is streaming into it: no second writer, no expiry, no cancel


class Registry:
    def __init__(
        self,
        store: Store,
        resources: Resources,
        base_url: Callable[[], str],
        *,
        limits: Limits | None = None,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.resources = resources
        self._base_url = base_url
        self._clock = clock
        self.blobs = Blobs(blob_directory(store.path), limits)
        self.catalog = Catalog(store.path, wall)
        self.tokens = RegistryTokens(SigningKey.stored(store, "registry"), lambda: self.realm, wall=wall)
        self.sessions: dict[str, Session] = {}

    @property
    def service(self) -> str:
        """The service name in challenges and the registry token's audience: ``host:port``."""
        return self._base_url().partition("://")[2]

    @property
    def realm(self) -> str:
        return self._base_url() + TOKEN_PATH

    # -- names --------------------------------------------------------------------------------------

    def organization(self, name: str, identity: str | None = None) -> Group | None:
        """The root group called ``name``; among namesakes the oldest one ``identity`` has a role in."""
        orgs = sorted(
            (g for g in self.store.groups.values() if g.name == name and "/" not in g.uid),
            key=lambda g: (g.create_ms, g.uid),
        )
        if identity is not None and len(orgs) > 1:
            bound = [b.group for b in self.store.bindings_of(identity)]
            for org in orgs:
                if any(is_within(group, org.uid) for group in bound):
                    return org
        return orgs[0] if orgs else None

    def repo(self, name: ImageName, identity: str | None = None) -> Repo | None:
        org = self.organization(name.org, identity)
        return None if org is None else self._repo_in(org, name.repo)

    def _repo_in(self, org: Group, name: str) -> Repo | None:
        found = [r for r in self.store.repos.values() if r.name == name and is_within(r.uid, org.uid)]
        return min(found, key=lambda r: (r.create_ms, r.uid)) if found else None

    def ensure_repo(self, name: ImageName, identity: str) -> Repo:
        """The repo, made under the organization's root group on the first push of a new name."""
        org = self.organization(name.org, identity)
        if org is None:  # it existed when the push was granted, and has been deleted since
            raise RegistryError("NAME_UNKNOWN", f"there is no organization named {name.org!r}")
        return self._repo_in(org, name.repo) or repos.create(self.resources, org.uid, name.repo)

    # -- rights -------------------------------------------------------------------------------------

    def rights(self, identity: str, name: ImageName) -> frozenset[str]:
        """The actions ``identity`` may take on ``name`` now: a subset of pull, push, delete, *."""
        org = self.organization(name.org, identity)
        if org is None:
            return frozenset()
        repo = self._repo_in(org, name.repo)
        group = parent_of(repo.uid) if repo is not None else org.uid
        granted = set()
        if access.allowed(access.scopes(self.store, identity, "repos.pull"), group):
            granted.add("pull")
        if access.allowed(access.scopes(self.store, identity, "repos.push"), group):
            granted |= {"push", "delete", "*"}
        return frozenset(granted)

    # -- upload sessions ----------------------------------------------------------------------------

    def open_session(self, repo: str) -> Session:
        self._expire_sessions()
        if len(self.sessions) >= self.blobs.limits.max_uploads:
            raise RegistryError(
                "TOOMANYREQUESTS",
                f"{len(self.sessions)} uploads are open; finish or cancel one (DELETE its Location)",
            )
        session = Session(self.blobs.start(), repo, self._clock())
        self.sessions[session.upload.session] = session
        return session

    def session(self, session_id: str, repo: str) -> Session | None:
        self._expire_sessions()
        session = self.sessions.get(session_id)
        if session is None or session.repo != repo:
            return None
        session.touched = self._clock()
        return session

    def close_session(self, session: Session, discard: bool) -> None:
        self.sessions.pop(session.upload.session, None)
        if discard:
            self.blobs.discard(session.upload)

    def _expire_sessions(self) -> None:
        oldest = self._clock() - self.blobs.limits.upload_idle
        for session in [s for s in self.sessions.values() if s.touched < oldest and not s.busy]:
            self.close_session(session, discard=True)

    # -- the Python face ----------------------------------------------------------------------------

    def push(self, repo: Repo, tag: str, image: Image) -> Tag:
        """Store ``image`` in ``repo`` and point ``tag`` at it, as a client's push would."""
        for blob in image.blobs:
            self.catalog.link(repo.uid, self.blobs.put(blob))
        digest = self.blobs.put(image.manifest)
        manifest = self.catalog.put_manifest(repo.uid, digest, image.media_type, len(image.manifest))
        return self.catalog.set_tag(repo.uid, tag, manifest)

    def close(self) -> None:
        self.blobs.close()
        self.catalog.close()
