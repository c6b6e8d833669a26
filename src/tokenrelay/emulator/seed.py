"""``--seed``: a starter organization with groups, repos, an image (``acme/hello:latest``) and two
identities to try the API with.

Idempotent: an organization named ``acme`` already in the state is reused, not duplicated. The
identities match this emulator's issuer and the subjects ``seed-owner`` and ``seed-viewer``, so
``tokenrelay emulate mint --sub seed-owner`` gives a token that the token service accepts. The repo
``hello`` gets two advisories.
"""

from __future__ import annotations

from dataclasses import dataclass

from .app import Emulator
from .iam import groups
from .iam.kinds import Group, Identity
from .registry import tiny_image

ORG_NAME = "acme"
SUBJECTS = {"owner": "seed-owner", "viewer": "seed-viewer"}
LAYOUT = {
    "platform": ["base-images", "tokenrelay"],
    "platform/builds": ["builder"],
    "apps": ["web", "api"],
    "apps/staging": [],
}


ADVISORIES: list[dict[str, object]] = [
    {
        "vulnerabilityId": "CVE-2026-0001",
        "aliases": ["GHSA-aaaa-bbbb-cccc"],
        "package": "openssl",
        "severity": "HIGH",
        "status": "FIXED",
        "fixedVersion": "3.4.1-r0",
        "summary": "example advisory from --seed",
    },
    {
        "vulnerabilityId": "CVE-2026-0002",
        "package": "busybox",
        "severity": "LOW",
        "status": "UNDER_INVESTIGATION",
        "summary": "example advisory from --seed",
    },
]


@dataclass(frozen=True, slots=True)
class Seeded:
    organization: Group
    identities: dict[str, Identity]  # role name -> identity


def seed(emulator: Emulator) -> Seeded:
    store = emulator.store
    for group in store.groups.values():
        if group.name == ORG_NAME and "/" not in group.uid:
            identities = {
                role: identity
                for role, subject in SUBJECTS.items()
                for identity in store.identities.values()
                if identity.subject == subject and identity.uid.startswith(group.uid + "/")
            }
            return Seeded(group, identities)
    org = emulator.organization(ORG_NAME, "starter organization from --seed")
    uids = {"": org.uid}
    for path, repos in LAYOUT.items():
        parent, _, name = path.rpartition("/")
        group = groups.create(emulator.resources, uids[parent], {"name": name})
        uids[path] = group.uid
        for repo in repos:
            emulator.repo(group.uid, repo)
    hello = emulator.repo(org.uid, "hello")
    emulator.registry.push(hello, "latest", tiny_image({"hello.txt": b"hello from the emulator\n"}))
    for fields in ADVISORIES:
        emulator.advisory(hello.uid, fields)
    identities = {
        role: emulator.workload(org.uid, subject, role=role, name=f"seed {role}").identity
        for role, subject in SUBJECTS.items()
    }
    return Seeded(org, identities)
