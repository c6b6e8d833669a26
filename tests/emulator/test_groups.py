"""The document's rules for groups, pinned over HTTP."""

from __future__ import annotations

import re

import pytest

from tokenrelay.emulator.errors import IAM_DOMAIN
from tokenrelay.emulator.iam import groups

from ..support.emulator import World, details

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


async def test_create_group_shape(world: World) -> None:
    """A created group has a slash-path uid under its parent, ms timestamps, verified false."""
    status, group = await world.call(
        "POST", f"/iam/v2beta1/groups/{world.org.uid}", json={"name": "team a", "description": "d"}
    )
    assert status == 200
    parent, _, segment = group["uid"].rpartition("/")
    assert parent == world.org.uid
    assert re.fullmatch(r"[0-9a-f]{16}", segment)
    assert "/" not in world.org.uid
    assert group["name"] == "team a"
    assert group["description"] == "d"
    assert group["verified"] is False
    assert group["resourceLimits"] == {}
    assert TIMESTAMP.match(group["createTime"])
    assert TIMESTAMP.match(group["updateTime"])
    status, fetched = await world.call("GET", f"/iam/v2beta1/groups/{group['uid']}")
    assert (status, fetched) == (200, group)


@pytest.mark.parametrize("name", ["a", "team-1", "a b.c_d-9", "..."])
async def test_names_matching_the_pattern_are_accepted(world: World, name: str) -> None:
    """Names of lowercase letters, digits, space, dot, underscore and hyphen are accepted."""
    status, _ = await world.call("POST", f"/iam/v2beta1/groups/{world.org.uid}", json={"name": name})
    assert status == 200


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "Team"}, {"name": "a/b"}, {"name": "a\n"}])
async def test_bad_name_is_refused_with_the_documented_body(world: World, body: dict[str, str]) -> None:
    """A missing or non-matching name gets code 3, ErrorInfo INVALID_ARGUMENT and a fieldViolation."""
    status, error = await world.call("POST", f"/iam/v2beta1/groups/{world.org.uid}", json=body)
    assert status == 400
    assert error["code"] == 3
    assert error["message"].startswith("Invalid argument: name: ")
    assert "^[a-z0-9 ._-]{1,}$" in error["message"]
    info = details(error, "ErrorInfo")
    assert (info["reason"], info["domain"]) == ("INVALID_ARGUMENT", IAM_DOMAIN)
    violations = details(error, "BadRequest")["fieldViolations"]
    assert [v["field"] for v in violations] == ["name"]
    assert "^[a-z0-9 ._-]{1,}$" in violations[0]["description"]


async def test_create_under_missing_parent_is_not_found(world: World) -> None:
    """Creating under a parent that does not exist answers 404 with code 5."""
    status, error = await world.call(
        "POST", f"/iam/v2beta1/groups/{world.org.uid}/0000000000000000", json={"name": "x"}
    )
    assert (status, error["code"]) == (404, 5)


async def test_patch_without_mask_changes_only_present_fields(world: World) -> None:
    """PATCH without updateMask changes the fields in the body and keeps the others."""
    group = groups.create(world.emulator.resources, world.org.uid, {"name": "old", "description": "keep"})
    world.clock.jump_wall(1.5)
    status, patched = await world.call("PATCH", f"/iam/v2beta1/groups/{group.uid}", json={"name": "new"})
    assert status == 200
    assert (patched["name"], patched["description"]) == ("new", "keep")
    assert patched["updateTime"] > patched["createTime"]


async def test_patch_with_mask_changes_only_listed_fields(world: World) -> None:
    """PATCH with updateMask changes the listed fields and ignores the rest of the body."""
    group = groups.create(world.emulator.resources, world.org.uid, {"name": "old", "description": "before"})
    status, patched = await world.call(
        "PATCH",
        f"/iam/v2beta1/groups/{group.uid}?updateMask=description",
        json={"name": "ignored", "description": "after"},
    )
    assert status == 200
    assert (patched["name"], patched["description"]) == ("old", "after")


async def test_patch_mask_clears_a_listed_field_left_out(world: World) -> None:
    """A field named in updateMask but absent from the body is cleared (AIP-134)."""
    group = groups.create(world.emulator.resources, world.org.uid, {"name": "g", "description": "text"})
    status, patched = await world.call(
        "PATCH", f"/iam/v2beta1/groups/{group.uid}?updateMask=name,description", json={"name": "h"}
    )
    assert status == 200
    assert (patched["name"], patched["description"]) == ("h", "")


async def test_patch_refuses_unknown_mask_field_and_bad_name(world: World) -> None:
    """An updateMask naming an output-only field, or a bad new name, gets code 3."""
    group = world.group(world.org.uid, "g")
    status, error = await world.call(
        "PATCH", f"/iam/v2beta1/groups/{group.uid}?updateMask=verified", json={"verified": True}
    )
    assert (status, error["code"]) == (400, 3)
    assert details(error, "BadRequest")["fieldViolations"][0]["field"] == "updateMask"
    status, error = await world.call("PATCH", f"/iam/v2beta1/groups/{group.uid}", json={"name": "BAD"})
    assert (status, error["code"]) == (400, 3)
    assert world.emulator.store.groups[group.uid].name == "g"


async def test_delete_with_child_repos_is_refused_with_the_documented_body(world: World) -> None:
    """Deleting a group with repos gets code 9 and a RESOURCE_NOT_EMPTY PreconditionFailure."""
    group = world.group(world.org.uid, "g")
    world.emulator.repo(group.uid, "r")
    status, error = await world.call("DELETE", f"/iam/v2beta1/groups/{group.uid}")
    assert status == 400
    assert error["code"] == 9
    assert error["message"] == "Precondition failed: cannot delete group with child repos"
    info = details(error, "ErrorInfo")
    assert (info["reason"], info["domain"]) == ("FAILED_PRECONDITION", IAM_DOMAIN)
    violations = details(error, "PreconditionFailure")["violations"]
    assert [v["type"] for v in violations] == ["RESOURCE_NOT_EMPTY"]
    assert violations[0]["description"]
    assert group.uid in world.emulator.store.groups


async def test_delete_with_child_group_is_refused(world: World) -> None:
    """A group with a child group cannot be deleted either."""
    group = world.group(world.org.uid, "g")
    world.group(group.uid, "child")
    status, error = await world.call("DELETE", f"/iam/v2beta1/groups/{group.uid}")
    assert (status, error["code"]) == (400, 9)
    assert error["message"] == "Precondition failed: cannot delete group with child groups"


async def test_delete_empty_group(world: World) -> None:
    """An empty group is deleted with an empty body; it is gone afterwards."""
    group = world.group(world.org.uid, "g")
    status, body = await world.call("DELETE", f"/iam/v2beta1/groups/{group.uid}")
    assert (status, body) == (200, None)
    status, error = await world.call("GET", f"/iam/v2beta1/groups/{group.uid}")
    assert (status, error["code"]) == (404, 5)


async def test_filters(world: World) -> None:
    """descendants_of, children_of and name filter, alone and combined."""
    a = world.group(world.org.uid, "a")
    a1 = world.group(a.uid, "x")
    a11 = world.group(a1.uid, "x")
    b = world.group(world.org.uid, "x")
    other = world.emulator.organization("x")  # another org: must stay out of scoped searches
    world.emulator.workload(other.uid, "sub-owner-other", role="owner")

    async def names(query: str) -> set[str]:
        status, body = await world.call("GET", f"/iam/v2beta1/groups?{query}")
        assert status == 200, body
        assert body["totalCount"] == str(len(body["groups"]))
        return {g["uid"] for g in body["groups"]}

    assert await names(f"uidp.descendants_of={a.uid}") == {a1.uid, a11.uid}
    assert await names(f"uidp.children_of={a.uid}") == {a1.uid}
    assert await names(f"uidp.children_of={world.org.uid}") == {a.uid, b.uid}
    assert await names("name=x") == {a1.uid, a11.uid, b.uid}  # the owner cannot see the other org
    assert await names(f"name=x&uidp.descendants_of={a.uid}") == {a1.uid, a11.uid}
    assert await names(f"name=x&uidp.children_of={world.org.uid}") == {b.uid}
    assert await names("name=X") == set()  # exact match only


async def test_list_envelope(world: World) -> None:
    """Lists carry the plural key, totalCount as a string and skipped echoing skip."""
    for i in range(3):
        world.group(world.org.uid, f"g{i}")
    status, body = await world.call("GET", f"/iam/v2beta1/groups?uidp.children_of={world.org.uid}&skip=1")
    assert status == 200
    assert body["totalCount"] == "3"
    assert body["skipped"] == 1
    assert len(body["groups"]) == 2
    assert "nextPageToken" not in body


async def test_v1_groups_shape(world: World) -> None:
    """/iam/v1/groups answers items with id, name, description, resourceLimits and verified."""
    group = groups.create(world.emulator.resources, world.org.uid, {"name": "g", "description": "d"})
    status, body = await world.call("GET", f"/iam/v1/groups?id={group.uid}")
    assert status == 200
    assert list(body) == ["items"]
    [item] = body["items"]
    assert item["id"] == group.uid
    assert "uid" not in item
    assert (item["name"], item["description"], item["verified"]) == ("g", "d", False)
    assert set(item["resourceLimits"]) == {"clusters", "idps", "repositories"}
    assert TIMESTAMP.match(item["createdAt"])
    status, body = await world.call("GET", "/iam/v1/groups")
    assert {item["id"] for item in body["items"]} == {world.org.uid, group.uid}


async def test_repos_v2_and_v1(world: World) -> None:
    """Repos list with descendants_of (v2) and as items with id (v1)."""
    group = world.group(world.org.uid, "g")
    inner = world.emulator.repo(group.uid, "inner")
    outer = world.emulator.repo(world.org.uid, "outer")
    status, body = await world.call("GET", f"/registry/v2beta1/repos?uidp.descendants_of={group.uid}")
    assert status == 200
    assert body["repos"] == [inner.v2()]
    assert set(body["repos"][0]) == {"uid", "name", "createTime"}
    assert body["totalCount"] == "1"
    status, body = await world.call("GET", "/registry/v1/repos")
    assert status == 200
    assert {item["id"] for item in body["items"]} == {inner.uid, outer.uid}
    status, body = await world.call("GET", f"/registry/v2beta1/repos/{inner.uid}")
    assert (status, body["name"]) == (200, "inner")


async def test_unknown_path_is_an_aip193_not_found(world: World) -> None:
    """A path the API does not have answers 404 with an AIP-193 body."""
    status, error = await world.call("GET", "/iam/v2beta1/nothing")
    assert (status, error["code"]) == (404, 5)
