"""The operations the document lists without paths: identities and role bindings updated, custom
roles, identity providers, account associations, group invites, repos and advisories."""

from __future__ import annotations

import re
from contextlib import AsyncExitStack
from typing import Any

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.emulator.iam import identities, roles
from tokenrelay.emulator.iam.access import ROLE_BY_NAME
from tokenrelay.lite.timestamps import format_timestamp

from ..support.emulator import World, details, invalid, precondition, simple

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
VIEWER = ROLE_BY_NAME["viewer"].uid
IAM = "/iam/v2beta1"


def times_ok(resource: dict[str, Any]) -> bool:
    return bool(TIMESTAMP.match(resource["createTime"]) and TIMESTAMP.match(resource["updateTime"]))


async def test_identity_get_list_and_update(world: World) -> None:
    """Identities are read one by one and listed, and PATCH follows the rules of groups (mask or not)."""
    team = world.group(world.org.uid, "team")
    created = identities.create(
        world.emulator.resources,
        team.uid,
        {"name": "ci", "claimMatch": {"issuer": "https://issuer.example", "subject": "a"}},
    )
    status, got = await world.call("GET", f"{IAM}/identities/{created.uid}")
    assert (status, got) == (200, created.v2())
    status, listed = await world.call("GET", f"{IAM}/identities?uidp.children_of={team.uid}")
    assert (status, listed["identities"], listed["totalCount"]) == (200, [created.v2()], "1")
    world.wall.advance(1)
    status, patched = await world.call(
        "PATCH", f"{IAM}/identities/{created.uid}", json={"claimMatch": {"subject": "b"}}
    )
    assert status == 200
    assert patched["claimMatch"] == {"issuer": "https://issuer.example", "subject": "b"}
    assert patched["name"] == "ci"
    assert patched["updateTime"] > patched["createTime"]
    status, patched = await world.call(
        "PATCH",
        f"{IAM}/identities/{created.uid}?updateMask=description,claimMatch.subject",
        json={"name": "ignored", "description": "d", "claimMatch": {"subject": "c", "issuer": "https://x"}},
    )
    assert (patched["name"], patched["description"]) == ("ci", "d")
    assert patched["claimMatch"] == {"issuer": "https://issuer.example", "subject": "c"}
    status, error = await world.call(
        "PATCH", f"{IAM}/identities/{created.uid}?updateMask=claimMatch.subject", json={}
    )
    assert (status, error["code"]) == (400, 3)
    assert details(error, "BadRequest")["fieldViolations"] == [
        {"field": "claimMatch.subject", "description": "required"}
    ]


async def test_custom_role_lifecycle(world: World) -> None:
    """An owner defines a role with capabilities; binding it grants exactly them; it cannot be deleted
    while bound; built-in roles cannot be changed."""
    team = world.group(world.org.uid, "team")
    status, role = await world.call(
        "POST",
        f"{IAM}/roles/{team.uid}",
        json={"name": "lister", "description": "lists groups", "capabilities": ["groups.list", "groups.get"]},
    )
    assert status == 200, role
    assert role["uid"].startswith(team.uid + "/")
    assert role["capabilities"] == ["groups.get", "groups.list"]
    assert times_ok(role)
    assert (await world.call("GET", f"{IAM}/roles/{role['uid']}"))[1] == role
    status, roles = await world.call("GET", f"{IAM}/roles?name=lister")
    assert roles["roles"] == [role]
    status, roles = await world.call("GET", f"{IAM}/roles", as_="outsider")
    assert role["uid"] not in {r["uid"] for r in roles["roles"]}  # custom roles: like any resource
    assert {"viewer", "editor", "owner"} <= {r["name"] for r in roles["roles"]}

    member = identities.create(
        world.emulator.resources, team.uid, {"claimMatch": {"issuer": "https://i.example", "subject": "m"}}
    )
    status, binding = await world.call(
        "POST", f"{IAM}/roleBindings/{team.uid}", json={"identityUid": member.uid, "roleUid": role["uid"]}
    )
    assert status == 200, binding
    assert binding["role"] == {"uid": role["uid"], "name": "lister", "description": "lists groups"}
    world.tokens["member"] = world.emulator.api_token(member.uid)
    assert (await world.call("GET", f"{IAM}/groups/{team.uid}", as_="member"))[0] == 200
    assert (await world.call("GET", f"{IAM}/identities/{member.uid}", as_="member"))[0] == 403

    status, patched = await world.call(
        "PATCH",
        f"{IAM}/roles/{role['uid']}?updateMask=capabilities",
        json={"capabilities": ["identities.get"]},
    )
    assert (status, patched["capabilities"]) == (200, ["identities.get"])
    assert (await world.call("GET", f"{IAM}/identities/{member.uid}", as_="member"))[0] == 200

    status, error = await world.call("DELETE", f"{IAM}/roles/{role['uid']}")
    assert (status, error) == (
        400,
        precondition(
            "Precondition failed: cannot delete role still referred to by roleBindings",
            [
                {
                    "type": "RESOURCE_IN_USE",
                    "subject": role["uid"],
                    "description": f"role is named by 1 roleBindings: {binding['uid']}",
                }
            ],
        ),
    )
    assert (await world.call("DELETE", f"{IAM}/roleBindings/{binding['uid']}"))[0] == 200
    assert (await world.call("DELETE", f"{IAM}/roles/{role['uid']}"))[0] == 200

    status, error = await world.call("PATCH", f"{IAM}/roles/{VIEWER}", json={"name": "x"})
    assert (status, error) == (
        403,
        simple(7, "PERMISSION_DENIED", "Permission denied: the built-in role viewer cannot be changed"),
    )
    assert (await world.call("DELETE", f"{IAM}/roles/{VIEWER}"))[0] == 403


async def test_custom_role_is_usable_only_where_defined(world: World) -> None:
    """A role defined in one group cannot be bound in a sibling group (3 naming roleUid)."""
    a, b = world.group(world.org.uid, "a"), world.group(world.org.uid, "b")
    role = roles.create(world.emulator.resources, a.uid, {"name": "r", "capabilities": ["groups.get"]})
    status, error = await world.call(
        "POST", f"{IAM}/roleBindings/{b.uid}", json={"identityUid": world.uids["viewer"], "roleUid": role.uid}
    )
    assert (status, error["code"]) == (400, 3)
    assert details(error, "BadRequest")["fieldViolations"] == [
        {
            "field": "roleUid",
            "description": f"role {role.uid} is defined in group {a.uid}: bind it there or below",
        }
    ]


async def test_role_binding_get_update_and_filters(world: World) -> None:
    """A binding is read by uid, listed by identityUid, and its role changed by PATCH."""
    [binding] = world.emulator.store.bindings_of(world.uids["viewer"])
    status, got = await world.call("GET", f"{IAM}/roleBindings/{binding.uid}")
    assert status == 200
    assert got["role"]["name"] == "viewer"
    assert got["identity"]["uid"] == world.uids["viewer"]
    status, listed = await world.call("GET", f"{IAM}/roleBindings?identityUid={world.uids['viewer']}")
    assert [b["uid"] for b in listed["roleBindings"]] == [binding.uid]
    editor = ROLE_BY_NAME["editor"].uid
    world.wall.advance(1)
    status, patched = await world.call(
        "PATCH", f"{IAM}/roleBindings/{binding.uid}?updateMask=roleUid", json={"roleUid": editor}
    )
    assert (status, patched["role"]["name"]) == (200, "editor")
    assert patched["updateTime"] > patched["createTime"]
    status, _ = await world.call("POST", f"{IAM}/groups/{world.org.uid}", as_="viewer", json={"name": "n"})
    assert status == 200  # the viewer identity is an editor now
    status, error = await world.call(
        "PATCH", f"{IAM}/roleBindings/{binding.uid}?updateMask=identityUid", json={"identityUid": "x"}
    )
    assert (status, details(error, "BadRequest")["fieldViolations"][0]["field"]) == (400, "updateMask")


async def test_binding_another_organizations_identity_is_refused(world: World) -> None:
    """An owner cannot bind an identity of another organization and so read its claims (3, identityUid)."""
    status, error = await world.call(
        "POST",
        f"{IAM}/roleBindings/{world.org.uid}",
        json={"identityUid": world.uids["outsider"], "roleUid": VIEWER},
    )
    assert (status, error) == (
        400,
        invalid(
            [
                (
                    "identityUid",
                    f"identity {world.uids['outsider']} belongs to another organization: "
                    "invite it with a group invite",
                )
            ]
        ),
    )
    assert not [b for b in world.emulator.store.role_bindings.values() if b.identity == world.uids["outsider"]
                and b.group == world.org.uid]  # fmt: skip


async def test_binding_needs_the_right_to_read_the_identity(world: World) -> None:
    """An owner of a subgroup cannot bind (and so read) an identity of a group it cannot read."""
    a, b = world.group(world.org.uid, "a"), world.group(world.org.uid, "b")
    owner_a = world.emulator.workload(a.uid, "sub-owner-a", role="owner").identity
    world.tokens["owner-a"] = world.emulator.api_token(owner_a.uid)
    hidden = identities.create(
        world.emulator.resources, b.uid, {"claimMatch": {"issuer": "https://i.example", "subject": "secret"}}
    )
    status, error = await world.call(
        "POST",
        f"{IAM}/roleBindings/{a.uid}",
        as_="owner-a",
        json={"identityUid": hidden.uid, "roleUid": VIEWER},
    )
    assert (status, error) == (
        403,
        simple(7, "PERMISSION_DENIED", f"Permission denied: identities.get on {b.uid}"),
    )


async def test_identity_provider_crud_and_trust(world: World) -> None:
    """An identity provider's issuer is trusted for identities in its group and below, and only there."""
    async with AsyncExitStack() as stack:
        platform = await stack.enter_async_context(EmulatorServer(Emulator()))
        team = world.group(world.org.uid, "team")
        status, provider = await world.call(
            "POST",
            f"{IAM}/identityProviders/{team.uid}",
            json={"name": "ci", "oidc": {"issuer": platform.url}},
        )
        assert status == 200, provider
        assert provider["oidc"] == {"issuer": platform.url}
        assert provider["uid"].startswith(team.uid + "/")
        assert times_ok(provider)
        assert (await world.call("GET", f"{IAM}/identityProviders/{provider['uid']}"))[1] == provider
        listed = (await world.call("GET", f"{IAM}/identityProviders?uidp.descendants_of={world.org.uid}"))[1]
        assert listed["identityProviders"] == [provider]
        inside = identities.create(
            world.emulator.resources, team.uid, {"claimMatch": {"issuer": platform.url, "subject": "job"}}
        )
        outside = identities.create(
            world.emulator.resources,
            world.org.uid,
            {"claimMatch": {"issuer": platform.url, "subject": "job"}},
        )
        oidc = platform.emulator.mint("job", world.url)

        async def exchange(identity: str) -> tuple[int, Any]:
            params = {"aud": world.url, "identity": identity}
            headers = {"Authorization": f"Bearer {oidc}"}
            async with world.http.get(world.url + "/sts/exchange", params=params, headers=headers) as r:
                return r.status, await r.json()

        assert (await exchange(inside.uid))[0] == 200
        status, error = await exchange(outside.uid)
        assert (status, error["message"]) == (
            401,
            f"Unauthenticated: the OIDC token's issuer {platform.url} is not trusted",
        )
        status, patched = await world.call(
            "PATCH", f"{IAM}/identityProviders/{provider['uid']}", json={"description": "d"}
        )
        assert (status, patched["description"], patched["oidc"]) == (200, "d", {"issuer": platform.url})
        assert (await world.call("DELETE", f"{IAM}/identityProviders/{provider['uid']}"))[0] == 200
        assert (await exchange(inside.uid))[0] == 401


async def test_account_association_crud(world: World) -> None:
    """An association names exactly one cloud account; PATCH may switch it to another provider."""
    path = f"{IAM}/accountAssociations/{world.org.uid}"
    status, error = await world.call(
        "POST", path, json={"amazon": {"account": "12"}, "google": {"projectId": "p"}}
    )
    assert status == 400
    assert details(error, "BadRequest")["fieldViolations"] == [
        {"field": "google", "description": "give exactly one of amazon, google, azure"},
        {"field": "amazon.account", "description": "required: a 12-digit AWS account id"},
        {
            "field": "google.projectId",
            "description": "required: a Google Cloud project id (6-30 of a-z, 0-9, -)",
        },
    ]
    status, created = await world.call(
        "POST", path, json={"name": "prod", "amazon": {"account": "123456789012"}}
    )
    assert status == 200, created
    assert created["amazon"] == {"account": "123456789012"}
    assert times_ok(created)
    uid = created["uid"]
    assert (await world.call("GET", f"{IAM}/accountAssociations/{uid}", as_="viewer"))[1] == created
    status, switched = await world.call(
        "PATCH", f"{IAM}/accountAssociations/{uid}", json={"google": {"projectId": "my-project"}}
    )
    assert status == 200, switched
    assert "amazon" not in switched
    assert (switched["google"], switched["name"]) == ({"projectId": "my-project"}, "prod")
    listed = (await world.call("GET", f"{IAM}/accountAssociations?uidp.children_of={world.org.uid}"))[1]
    assert listed["accountAssociations"] == [switched]
    assert (await world.call("DELETE", f"{IAM}/accountAssociations/{uid}", as_="viewer"))[0] == 403
    assert (await world.call("DELETE", f"{IAM}/accountAssociations/{uid}", as_="editor"))[0] == 200


async def test_group_invite_accepted_by_another_organization(world: World) -> None:
    """An owner invites; an identity of another organization accepts with the code and gets the role
    there; a single-use invite is gone afterwards; a wrong code is 7."""
    team = world.group(world.org.uid, "team")
    status, invite = await world.call("POST", f"{IAM}/groupInvites/{team.uid}", json={"roleUid": VIEWER})
    assert status == 200, invite
    code = invite.pop("code")
    assert invite["role"]["name"] == "viewer"
    assert invite["singleUse"] is True
    assert TIMESTAMP.match(invite["expireTime"])
    status, got = await world.call("GET", f"{IAM}/groupInvites/{invite['uid']}")
    assert (status, got) == (200, invite)  # the code is shown once only
    assert (await world.call("GET", f"{IAM}/groups/{team.uid}", as_="outsider"))[0] == 403
    uid = invite["uid"]
    accept = f"{IAM}/groupInvites/{uid}:accept"
    status, error = await world.call("POST", accept, as_="outsider", json={"code": "wrong"})
    assert (status, error) == (
        403,
        simple(
            7, "PERMISSION_DENIED", f"Permission denied: the code does not open group invite {invite['uid']}"
        ),
    )
    status, binding = await world.call("POST", accept, as_="outsider", json={"code": code})
    assert status == 200, binding
    assert (binding["group"]["uid"], binding["role"]["name"]) == (team.uid, "viewer")
    assert binding["identity"]["uid"] == world.uids["outsider"]
    assert (await world.call("GET", f"{IAM}/groups/{team.uid}", as_="outsider"))[0] == 200
    assert (await world.call("GET", f"{IAM}/groupInvites/{invite['uid']}"))[0] == 404


async def test_group_invite_expiry_and_update(world: World) -> None:
    """An invite past its expireTime is refused with 9; PATCH moves expireTime, bounded to 30 days."""
    status, invite = await world.call(
        "POST", f"{IAM}/groupInvites/{world.org.uid}", json={"roleUid": VIEWER, "singleUse": False}
    )
    assert status == 200
    world.wall.advance(8 * 86400)
    uid = invite["uid"]
    accept = f"{IAM}/groupInvites/{uid}:accept"
    world.tokens["outsider"] = world.emulator.api_token(world.uids["outsider"])
    world.tokens["owner"] = world.emulator.api_token(world.uids["owner"])
    status, error = await world.call("POST", accept, as_="outsider", json={"code": invite["code"]})
    assert (status, error) == (
        400,
        precondition(
            f"Precondition failed: group invite {invite['uid']} expired at {invite['expireTime']}",
            [
                {
                    "type": "EXPIRED",
                    "subject": invite["uid"],
                    "description": "ask the group's owner for a new invite",
                }
            ],
        ),
    )

    later = format_timestamp(world.wall.now + 86400)
    status, patched = await world.call(
        "PATCH", f"{IAM}/groupInvites/{invite['uid']}?updateMask=expireTime", json={"expireTime": later}
    )
    assert (status, patched["expireTime"]) == (200, later)
    status, error = await world.call(
        "PATCH",
        f"{IAM}/groupInvites/{invite['uid']}",
        json={"expireTime": format_timestamp(world.wall.now + 40 * 86400), "singleUse": "yes"},
    )
    assert details(error, "BadRequest")["fieldViolations"] == [
        {"field": "expireTime", "description": "must be in the future and at most 30 days ahead"},
        {"field": "singleUse", "description": "must be true or false"},
    ]
    status, binding = await world.call("POST", accept, as_="outsider", json={"code": invite["code"]})
    assert (status, binding["group"]["uid"]) == (200, world.org.uid)
    assert (await world.call("GET", f"{IAM}/groupInvites/{invite['uid']}"))[0] == 200  # not single-use
    assert (await world.call("DELETE", f"{IAM}/groupInvites/{invite['uid']}"))[0] == 200


async def test_repos_and_advisories(world: World) -> None:
    """Repos are got by uid and filtered by name; advisories live under repos, readable with the repo."""
    team = world.group(world.org.uid, "team")
    repo = world.emulator.repo(team.uid, "web")
    world.emulator.repo(world.org.uid, "other")
    status, body = await world.call("GET", "/registry/v2beta1/repos?name=web", as_="viewer")
    assert body["repos"] == [repo.v2()]
    advisory = world.emulator.advisory(
        repo.uid, {"vulnerabilityId": "CVE-2026-1", "package": "openssl", "severity": "HIGH"}
    )
    assert advisory.uid.startswith(repo.uid + "/")
    async with world.http.post(
        f"{world.url}/emulator/v1/advisories/{repo.uid}",
        json={"vulnerabilityId": "CVE-2026-2", "package": "zlib", "status": "FIXED", "fixedVersion": "1.3"},
    ) as r:
        assert r.status == 200
        seeded = await r.json()
    status, got = await world.call("GET", f"/vulnerabilities/v2beta1/advisories/{advisory.uid}", as_="viewer")
    assert status == 200
    assert got == {
        "uid": advisory.uid,
        "vulnerabilityId": "CVE-2026-1",
        "aliases": [],
        "package": "openssl",
        "severity": "HIGH",
        "status": "UNDER_INVESTIGATION",
        "fixedVersion": "",
        "summary": "",
        "createTime": got["createTime"],
        "updateTime": got["createTime"],
    }
    status, body = await world.call(
        "GET", f"/vulnerabilities/v2beta1/advisories?uidp.descendants_of={team.uid}&order_by=uid desc"
    )
    assert [a["uid"] for a in body["advisories"]] == sorted([advisory.uid, seeded["uid"]], reverse=True)
    status, body = await world.call("GET", "/vulnerabilities/v2beta1/advisories?vulnerabilityId=CVE-2026-2")
    assert [a["uid"] for a in body["advisories"]] == [seeded["uid"]]
    status, error = await world.call(
        "GET", f"/vulnerabilities/v2beta1/advisories/{advisory.uid}", as_="outsider"
    )
    assert (status, error["code"]) == (403, 7)
    status, error = await world.call("POST", f"/vulnerabilities/v2beta1/advisories/{repo.uid}", json={})
    assert (status, error["code"]) == (405, 12)  # read-only over the API
