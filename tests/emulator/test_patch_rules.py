"""PATCH on every kind that has one: output-only and immutable fields in the body are ignored, unknown
fields are refused (docs/emulator.md "Resources and their fields"; the document's rules 3 and 4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tokenrelay.emulator.iam.access import ROLE_BY_NAME

from ..support.emulator import World

IAM = "/iam/v2beta1"
VIEWER, EDITOR = ROLE_BY_NAME["viewer"].uid, ROLE_BY_NAME["editor"].uid
STAMP = "2001-01-01T00:00:00.000Z"
# what the client sends for a field the server owns: none of it may land
SERVER_OWNED = {"uid": "elsewhere/0000000000000000", "createTime": STAMP, "updateTime": STAMP}


@dataclass(frozen=True)
class Kind:
    plural: str
    create: dict[str, Any]  # the body of a create under the organization
    change: dict[str, Any]  # one updatable field with a new value
    not_updatable: dict[str, Any]  # the kind's own output-only and immutable fields, with other values
    shown: tuple[str, str | None] = ("description", None)  # where an answer shows the change: field, key
    follows: frozenset[str] = frozenset()  # output fields that follow the change (a binding's role)


KINDS = [
    Kind(
        "groups",
        {"name": "team"},
        {"description": "new"},
        {"verified": True, "resourceLimits": {"repos": 1}},
    ),
    Kind(
        "identities",
        {"name": "ci", "claimMatch": {"issuer": "https://issuer.example", "subject": "job"}},
        {"description": "new"},
        {"lastSeenTime": STAMP},
    ),
    Kind(
        "roles",
        {"name": "reader", "capabilities": ["groups.list"]},
        {"description": "new"},
        {},
    ),
    Kind(
        "identityProviders",
        {"name": "gha", "oidc": {"issuer": "https://gha.example"}},
        {"description": "new"},
        {},
    ),
    Kind(
        "accountAssociations",
        {"name": "prod", "amazon": {"account": "123456789012"}},
        {"description": "new"},
        {},
    ),
    Kind(
        "groupInvites",
        {"roleUid": VIEWER},
        {"singleUse": False},
        {"roleUid": EDITOR, "role": {"uid": EDITOR, "name": "editor"}, "code": "chosen"},
        ("singleUse", None),
    ),
    Kind(
        "roleBindings",
        {"roleUid": VIEWER},  # identityUid: the world's editor, added below
        {"roleUid": EDITOR},
        {"identityUid": "", "identity": {"uid": "x"}, "group": {"uid": "x"}, "role": {"uid": VIEWER}},
        ("role", "uid"),
        frozenset({"role"}),
    ),
]


async def created(world: World, kind: Kind) -> str:
    """A new resource of ``kind`` in a group of its own; its uid."""
    team = world.group(world.org.uid, "patched")
    body = dict(kind.create)
    if kind.plural == "roleBindings":
        body["identityUid"] = world.uids["editor"]
    status, answer = await world.call("POST", f"{IAM}/{kind.plural}/{team.uid}", json=body)
    assert status == 200, answer
    uid: str = answer["uid"]
    return uid


def others(kind: Kind, world: World) -> dict[str, Any]:
    fields = {**SERVER_OWNED, **kind.not_updatable}
    if "identityUid" in fields:
        fields["identityUid"] = world.uids["viewer"]
    return fields


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.plural)
async def test_patch_without_a_mask_ignores_fields_it_cannot_update(world: World, kind: Kind) -> None:
    """A PATCH without updateMask of only output-only and immutable fields changes nothing, updateTime
    included; with an updatable field beside them, that field alone changes."""
    uid = await created(world, kind)
    path = f"{IAM}/{kind.plural}/{uid}"
    _, before = await world.call("GET", path)
    world.clock.jump_wall(2)
    status, answer = await world.call("PATCH", path, json=others(kind, world))
    assert (status, answer) == (200, before)
    assert (await world.call("GET", path))[1] == before
    world.clock.jump_wall(2)
    status, answer = await world.call("PATCH", path, json={**others(kind, world), **kind.change})
    assert status == 200, answer
    field, key = kind.shown
    assert (answer[field] if key is None else answer[field][key]) == next(iter(kind.change.values()))
    kept = set(others(kind, world)) - kind.follows - {"updateTime"}
    assert {name: answer.get(name) for name in kept} == {name: before.get(name) for name in kept}
    assert answer["updateTime"] > before["updateTime"]


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.plural)
@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "mask"])
async def test_patch_refuses_an_unknown_field_and_changes_nothing(
    world: World, kind: Kind, masked: bool
) -> None:
    """A PATCH with a field the kind does not have is code 3 naming it, with or without updateMask, and
    the resource is as it was."""
    uid = await created(world, kind)
    path = f"{IAM}/{kind.plural}/{uid}"
    _, before = await world.call("GET", path)
    mask = f"?updateMask={next(iter(kind.change))}" if masked else ""
    status, error = await world.call("PATCH", path + mask, json={**kind.change, "colour": "red"})
    assert (status, error["code"]) == (400, 3), error
    violations = error["details"][1]["fieldViolations"]
    assert [v["field"] for v in violations] == ["colour"]
    assert violations[0]["description"].startswith("unknown field; known fields: ")
    assert (await world.call("GET", path))[1] == before
