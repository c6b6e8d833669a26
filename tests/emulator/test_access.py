"""Authentication of API requests and access through role bindings."""

from __future__ import annotations

from tokenrelay.emulator.iam.access import ROLE_BY_NAME

from ..support.emulator import World, details


async def test_no_token_is_401(world: World) -> None:
    """A request without a bearer token gets 401 with code 16."""
    status, error = await world.call("GET", "/iam/v2beta1/groups", as_=None)
    assert (status, error["code"]) == (401, 16)
    assert details(error, "ErrorInfo")["reason"] == "UNAUTHENTICATED"


async def test_forged_expired_and_foreign_tokens_are_401(world: World) -> None:
    """Tokens not signed by this token service, expired, or for another audience get 401."""
    uid = world.uids["owner"]
    world.tokens["platform"] = world.emulator.mint(uid, world.url)  # the issuer's key, not the STS's
    world.tokens["garbage"] = "not-a-jwt"
    world.tokens["other-aud"] = world.emulator.tokens.mint(uid, "https://registry.example")
    world.tokens["short"] = world.emulator.api_token(uid, lifetime=60)
    world.clock.jump_wall(61)
    for name in ("platform", "garbage", "other-aud", "short"):
        status, error = await world.call("GET", "/iam/v2beta1/groups", as_=name)
        assert (status, error["code"]) == (401, 16), name


async def test_viewer_reads_but_cannot_write(world: World) -> None:
    """A viewer lists and gets, and is refused create, update and delete with 403 code 7."""
    group = world.group(world.org.uid, "g")
    status, body = await world.call("GET", "/iam/v2beta1/groups", as_="viewer")
    assert status == 200
    assert group.uid in {g["uid"] for g in body["groups"]}
    assert (await world.call("GET", f"/iam/v2beta1/groups/{group.uid}", as_="viewer"))[0] == 200
    for method, path, body_ in (
        ("POST", f"/iam/v2beta1/groups/{world.org.uid}", {"name": "n"}),
        ("PATCH", f"/iam/v2beta1/groups/{group.uid}", {"name": "n"}),
        ("DELETE", f"/iam/v2beta1/groups/{group.uid}", None),
    ):
        status, error = await world.call(method, path, as_="viewer", json=body_)
        assert (status, error["code"]) == (403, 7), method
        assert details(error, "ErrorInfo")["reason"] == "PERMISSION_DENIED"
    assert world.emulator.store.groups[group.uid].name == "g"


async def test_editor_writes_groups_but_not_access(world: World) -> None:
    """An editor creates groups but cannot create identities or role bindings."""
    status, _ = await world.call(
        "POST", f"/iam/v2beta1/groups/{world.org.uid}", as_="editor", json={"name": "n"}
    )
    assert status == 200
    identity = {"name": "i", "claimMatch": {"issuer": "https://issuer.example", "subject": "s"}}
    status, _ = await world.call(
        "POST", f"/iam/v2beta1/identities/{world.org.uid}", as_="editor", json=identity
    )
    assert status == 403


async def test_owner_manages_identities_and_bindings(world: World) -> None:
    """An owner creates an identity, binds it with a hydrated answer, and deletes both."""
    group = world.group(world.org.uid, "team")
    status, identity = await world.call(
        "POST",
        f"/iam/v2beta1/identities/{group.uid}",
        json={
            "name": "ci",
            "description": "the CI job",
            "claimMatch": {"issuer": "https://token.actions.githubusercontent.com", "subject": "repo:a/b"},
        },
    )
    assert status == 200
    assert identity["uid"].startswith(group.uid + "/")
    assert identity["claimMatch"] == {
        "issuer": "https://token.actions.githubusercontent.com",
        "subject": "repo:a/b",
    }
    assert identity["lastSeenTime"] == identity["createTime"]
    viewer = ROLE_BY_NAME["viewer"]
    status, binding = await world.call(
        "POST",
        f"/iam/v2beta1/roleBindings/{group.uid}",
        json={"identityUid": identity["uid"], "roleUid": viewer.uid},
    )
    assert status == 200
    assert binding["uid"].startswith(group.uid + "/")
    assert binding["identity"] == {
        "uid": identity["uid"],
        "name": "ci",
        "description": "the CI job",
        "subject": "repo:a/b",
        "issuer": "https://token.actions.githubusercontent.com",
    }
    assert binding["group"] == {"uid": group.uid, "name": "team", "description": ""}
    assert binding["role"] == {"uid": viewer.uid, "name": "viewer", "description": viewer.description}
    assert "createTime" in binding
    status, error = await world.call(
        "POST",
        f"/iam/v2beta1/roleBindings/{group.uid}",
        json={"identityUid": identity["uid"], "roleUid": viewer.uid},
    )
    assert (status, error["code"]) == (409, 6)
    assert (await world.call("DELETE", f"/iam/v2beta1/roleBindings/{binding['uid']}"))[0] == 200
    assert (await world.call("DELETE", f"/iam/v2beta1/identities/{identity['uid']}"))[0] == 200
    assert identity["uid"] not in world.emulator.store.identities


async def test_binding_refuses_missing_fields_and_unknown_role(world: World) -> None:
    """A role binding without identityUid gets 3; an unknown role gets 5."""
    status, error = await world.call(
        "POST", f"/iam/v2beta1/roleBindings/{world.org.uid}", json={"roleUid": "x"}
    )
    assert (status, error["code"]) == (400, 3)
    assert details(error, "BadRequest")["fieldViolations"][0]["field"] == "identityUid"
    status, error = await world.call(
        "POST",
        f"/iam/v2beta1/roleBindings/{world.org.uid}",
        json={"identityUid": world.uids["viewer"], "roleUid": "ffff"},
    )
    assert (status, error["code"]) == (404, 5)


async def test_binding_on_a_child_group_does_not_reach_the_parent(world: World) -> None:
    """Access follows bindings down the hierarchy, never up."""
    team = world.group(world.org.uid, "team")
    sub = world.group(team.uid, "sub")
    member = world.emulator.workload(team.uid, "sub-member", role="viewer").identity
    world.tokens["member"] = world.emulator.api_token(member.uid)
    assert (await world.call("GET", f"/iam/v2beta1/groups/{sub.uid}", as_="member"))[0] == 200
    assert (await world.call("GET", f"/iam/v2beta1/groups/{team.uid}", as_="member"))[0] == 200
    assert (await world.call("GET", f"/iam/v2beta1/groups/{world.org.uid}", as_="member"))[0] == 403
    _, body = await world.call("GET", "/iam/v2beta1/groups", as_="member")
    assert {g["uid"] for g in body["groups"]} == {team.uid, sub.uid}


async def test_outsider_sees_nothing(world: World) -> None:
    """An identity bound only in another organization lists none of this one's groups."""
    status, body = await world.call(
        "GET", f"/iam/v2beta1/groups?uidp.descendants_of={world.org.uid}", as_="outsider"
    )
    assert (status, body["groups"], body["totalCount"]) == (200, [], "0")
    status, error = await world.call("GET", f"/iam/v2beta1/groups/{world.org.uid}", as_="outsider")
    assert (status, error["code"]) == (403, 7)


async def test_deleting_an_identity_ends_its_api_tokens(world: World) -> None:
    """A bound identity cannot be deleted (9 naming the binding); once deleted, its unexpired API token
    is refused with 401 everywhere, even where any authenticated caller may read."""
    viewer = world.uids["viewer"]
    [binding] = world.emulator.store.bindings_of(viewer)
    status, error = await world.call("DELETE", f"/iam/v2beta1/identities/{viewer}")
    assert (status, error["code"]) == (400, 9)
    assert error["message"] == "Precondition failed: cannot delete identity still referred to by roleBindings"
    assert details(error, "PreconditionFailure")["violations"] == [
        {
            "type": "RESOURCE_IN_USE",
            "subject": viewer,
            "description": f"identity is named by 1 roleBindings: {binding.uid}",
        }
    ]
    assert (await world.call("DELETE", f"/iam/v2beta1/roleBindings/{binding.uid}"))[0] == 200
    assert (await world.call("DELETE", f"/iam/v2beta1/identities/{viewer}"))[0] == 200
    for path in ("/iam/v2beta1/roles", "/iam/v2beta1/groups"):
        status, error = await world.call("GET", path, as_="viewer")
        assert status == 401, path
        assert error["message"] == f"Unauthenticated: the API token's identity {viewer} no longer exists"


async def test_roles_list_includes_viewer(world: World) -> None:
    """Every caller can list the built-in roles; viewer among them, with a flat hex uid."""
    status, body = await world.call("GET", "/iam/v2beta1/roles?order_by=name", as_="viewer")
    assert status == 200
    assert [r["name"] for r in body["roles"]] == ["editor", "owner", "viewer"]
    assert body["totalCount"] == "3"
    viewer = next(r for r in body["roles"] if r["name"] == "viewer")
    assert "/" not in viewer["uid"]
    int(viewer["uid"], 16)
