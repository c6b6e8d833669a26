"""The emulator's API over gRPC, on the same port as its HTTP API: same store, same rules, same errors."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message
from yarl import URL

from tokenrelay.emulator.grpcapi import generate, iam_pb2, registry_pb2
from tokenrelay.emulator.iam import identity_providers
from tokenrelay.emulator.iam.access import ROLE_BY_NAME
from tokenrelay.lite.timestamps import format_timestamp

from ..support.emulator import World
from ..support.grpcurl import grpcurl_path
from .grpc_client import Client

GroupList = iam_pb2.ListGroupsResponse


def as_json(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


async def test_list_answers_what_the_json_api_answers(world: World, client: Client) -> None:
    """ListGroups over gRPC and GET /iam/v2beta1/groups give the same groups, envelope included."""
    world.group(world.org.uid, "team a")
    answer = await client.call(
        "/iam.v2beta1.Groups/ListGroups", iam_pb2.ListGroupsRequest(), GroupList, world.tokens["viewer"]
    )
    status, body = await world.call("GET", "/iam/v2beta1/groups", as_="viewer")
    assert status == 200
    # as messages: a Timestamp is an instant, which proto3 JSON prints with 0, 3, 6 or 9 decimals
    assert answer == json_format.ParseDict(body, GroupList())
    assert answer.total_count == 2


async def test_a_whole_second_reads_and_writes_back_alike_on_both_faces(world: World, client: Client) -> None:
    """At a whole second (".000Z"), both faces answer the same instant, and a gRPC client that echoes
    an expired invite's expiry back changes it as an HTTP client does: accepted, not re-checked."""
    world.wall.advance(math.ceil(world.wall.now) + 0.0001 - world.wall.now)  # 0.1 ms past a second: its ms
    status, made = await world.call(
        "POST",
        f"/iam/v2beta1/groupInvites/{world.org.uid}",
        json={
            "roleUid": ROLE_BY_NAME["viewer"].uid,
            "expireTime": format_timestamp(world.wall.now // 1 + 60),
        },
    )
    assert status == 200
    assert made["expireTime"].endswith(".000Z") and made["createTime"].endswith(".000Z"), made
    got = await client.call(
        "/iam.v2beta1.GroupInvites/GetGroupInvite",
        iam_pb2.GetGroupInviteRequest(uid=made["uid"]),
        iam_pb2.GroupInvite,
        world.tokens["owner"],
    )
    status, read = await world.call("GET", f"/iam/v2beta1/groupInvites/{made['uid']}")
    assert got == json_format.ParseDict(read, iam_pb2.GroupInvite()) and got.expire_time.nanos == 0
    world.wall.advance(120)  # the invite has expired: a changed expiry would have to be in the future
    echo = iam_pb2.UpdateGroupInviteRequest(uid=made["uid"], expire_time=got.expire_time, single_use=False)
    updated = await client.call(
        "/iam.v2beta1.GroupInvites/UpdateGroupInvite", echo, iam_pb2.GroupInvite, world.tokens["owner"]
    )
    status, over_http = await world.call(
        "PATCH",
        f"/iam/v2beta1/groupInvites/{made['uid']}",
        json={"expireTime": read["expireTime"], "singleUse": True},
    )
    assert (updated.single_use, updated.expire_time) == (False, got.expire_time)
    assert status == 200 and over_http["singleUse"] is True


async def test_pages_filters_and_order_cross_as_query_parameters(world: World, client: Client) -> None:
    """page_size, order_by, skip, uidp.children_of and page_token work as on the JSON API."""
    team = world.group(world.org.uid, "team")
    for name in ("c", "a", "b"):
        world.group(team.uid, name)
    request = iam_pb2.ListGroupsRequest(
        page_size=2, order_by="name desc", uidp=iam_pb2.Uidp(children_of=team.uid)
    )
    first = await client.call("/iam.v2beta1.Groups/ListGroups", request, GroupList, world.tokens["owner"])
    assert [g.name for g in first.groups] == ["c", "b"]
    assert first.total_count == 3 and first.next_page_token
    request.page_token = first.next_page_token
    second = await client.call("/iam.v2beta1.Groups/ListGroups", request, GroupList, world.tokens["owner"])
    assert [g.name for g in second.groups] == ["a"]
    skipped = await client.call(
        "/iam.v2beta1.Groups/ListGroups",
        iam_pb2.ListGroupsRequest(skip=1, order_by="name", uidp=iam_pb2.Uidp(children_of=team.uid)),
        GroupList,
        world.tokens["owner"],
    )
    assert [g.name for g in skipped.groups] == ["b", "c"] and skipped.skipped == 1


async def test_create_update_get_delete_a_group(world: World, client: Client) -> None:
    """A group made over gRPC is in the JSON API's store; the field mask limits what an update changes."""
    token = world.tokens["owner"]
    made = await client.call(
        "/iam.v2beta1.Groups/CreateGroup",
        iam_pb2.CreateGroupRequest(parent=world.org.uid, group=iam_pb2.Group(name="ops", description="d1")),
        iam_pb2.Group,
        token,
    )
    assert made.uid.startswith(world.org.uid + "/") and made.create_time.seconds > 0
    status, body = await world.call("GET", f"/iam/v2beta1/groups/{made.uid}")
    assert status == 200 and body["name"] == "ops"

    update = iam_pb2.UpdateGroupRequest(group=iam_pb2.Group(uid=made.uid, name="renamed", description="d2"))
    update.update_mask.paths.append("description")
    updated = await client.call("/iam.v2beta1.Groups/UpdateGroup", update, iam_pb2.Group, token)
    assert (updated.name, updated.description) == ("ops", "d2")

    got = await client.call(
        "/iam.v2beta1.Groups/GetGroup", iam_pb2.GetGroupRequest(uid=made.uid), iam_pb2.Group, token
    )
    assert as_json(got) == as_json(updated)

    from google.protobuf import empty_pb2

    await client.call(
        "/iam.v2beta1.Groups/DeleteGroup", iam_pb2.DeleteGroupRequest(uid=made.uid), empty_pb2.Empty, token
    )
    status, _ = await world.call("GET", f"/iam/v2beta1/groups/{made.uid}")
    assert status == 404


async def test_role_binding_created_over_grpc_is_hydrated(world: World, client: Client) -> None:
    """CreateRoleBinding takes identity_uid and role_uid and answers the hydrated references."""
    roles = await client.call(
        "/iam.v2beta1.Roles/ListRoles",
        iam_pb2.ListRolesRequest(),
        iam_pb2.ListRolesResponse,
        world.tokens["viewer"],
    )
    viewer = next(r for r in roles.roles if r.name == "viewer")
    binding = await client.call(
        "/iam.v2beta1.RoleBindings/CreateRoleBinding",
        iam_pb2.CreateRoleBindingRequest(
            parent=world.org.uid, identity_uid=world.uids["editor"], role_uid=viewer.uid
        ),
        iam_pb2.RoleBinding,
        world.tokens["owner"],
    )
    assert binding.identity.uid == world.uids["editor"] and binding.identity.subject == "sub-editor"
    assert (binding.group.uid, binding.role.name) == (world.org.uid, "viewer")


async def test_repos_over_grpc(world: World, client: Client) -> None:
    """The Registry domain's repos list and get over gRPC."""
    repo = world.emulator.repo(world.org.uid, "app")
    listed = await client.call(
        "/registry.v2beta1.Repos/ListRepos",
        registry_pb2.ListReposRequest(uidp=iam_pb2.Uidp(descendants_of=world.org.uid)),
        registry_pb2.ListReposResponse,
        world.tokens["viewer"],
    )
    assert [r.uid for r in listed.repos] == [repo.uid]
    got = await client.call(
        "/registry.v2beta1.Repos/GetRepo",
        registry_pb2.GetRepoRequest(uid=repo.uid),
        registry_pb2.Repo,
        world.tokens["viewer"],
    )
    assert got.name == "app"


async def test_errors_carry_the_json_apis_code_message_and_details(world: World, client: Client) -> None:
    """A refused create is INVALID_ARGUMENT with the very AIP-193 body the HTTP client gets."""
    request = iam_pb2.CreateGroupRequest(parent=world.org.uid, group=iam_pb2.Group(name="Not Valid"))
    code, status = await client.refusal(
        "/iam.v2beta1.Groups/CreateGroup", request, iam_pb2.Group, world.tokens["owner"]
    )
    http_status, body = await world.call(
        "POST", f"/iam/v2beta1/groups/{world.org.uid}", json={"name": "Not Valid"}
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and http_status == 400
    assert status == body


async def test_no_credentials_is_unauthenticated(world: World, client: Client) -> None:
    """A call without an authorization metadata entry is UNAUTHENTICATED (16), saying what to send."""
    code, status = await client.refusal(
        "/iam.v2beta1.Groups/ListGroups", iam_pb2.ListGroupsRequest(), GroupList, token=None
    )
    assert code == grpc.StatusCode.UNAUTHENTICATED and status["code"] == 16
    assert "Authorization: Bearer" in status["message"]


async def test_access_rules_are_the_json_apis(world: World, client: Client) -> None:
    """A viewer may read but not create (PERMISSION_DENIED); an outsider does not see the group."""
    request = iam_pb2.CreateGroupRequest(parent=world.org.uid, group=iam_pb2.Group(name="x"))
    code, _ = await client.refusal(
        "/iam.v2beta1.Groups/CreateGroup", request, iam_pb2.Group, world.tokens["viewer"]
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    listed = await client.call(
        "/iam.v2beta1.Groups/ListGroups", iam_pb2.ListGroupsRequest(), GroupList, world.tokens["outsider"]
    )
    assert world.org.uid not in [g.uid for g in listed.groups]


async def test_a_missing_uid_is_refused_before_the_json_api(world: World, client: Client) -> None:
    """GetGroup without a uid is INVALID_ARGUMENT naming the field, not a call on the collection."""
    code, status = await client.refusal(
        "/iam.v2beta1.Groups/GetGroup", iam_pb2.GetGroupRequest(), iam_pb2.Group, world.tokens["owner"]
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert status["details"][1]["fieldViolations"] == [{"field": "uid", "description": "required"}]


async def test_http1_and_grpc_share_the_port_under_concurrency(world: World, client: Client) -> None:
    """Interleaved HTTP/1.1 and gRPC calls on one port all succeed."""

    async def over_grpc() -> int:
        answer = await client.call(
            "/iam.v2beta1.Groups/ListGroups", iam_pb2.ListGroupsRequest(), GroupList, world.tokens["viewer"]
        )
        return int(answer.total_count)

    async def over_http() -> int:
        status, body = await world.call("GET", "/iam/v2beta1/groups", as_="viewer")
        assert status == 200
        return int(body["totalCount"])

    counts = await asyncio.gather(*(f() for _ in range(20) for f in (over_grpc, over_http)))
    assert set(counts) == {1}


@pytest.mark.e2e
async def test_grpcurl_lists_describes_and_calls_through_reflection(world: World) -> None:
    """The real grpcurl finds the services by reflection, with no proto files, describes a message and a
    method, and calls one."""
    target = world.url.removeprefix("http://")
    loop = asyncio.get_running_loop()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [grpcurl_path(), "-plaintext", *args], capture_output=True, text=True, timeout=30
        )

    listed = await loop.run_in_executor(None, run, target, "list")
    assert listed.returncode == 0, listed.stderr
    assert {"iam.v2beta1.Groups", "iam.v2beta1.RoleBindings", "registry.v2beta1.Repos"} <= set(
        listed.stdout.split()
    )
    described = await loop.run_in_executor(None, run, target, "describe", "iam.v2beta1.Group")
    assert "google.protobuf.Timestamp create_time" in described.stdout
    method = await loop.run_in_executor(None, run, target, "describe", "iam.v2beta1.Groups.CreateGroup")
    assert method.returncode == 0, method.stderr
    assert (
        "rpc CreateGroup ( .iam.v2beta1.CreateGroupRequest ) returns ( .iam.v2beta1.Group )" in method.stdout
    )
    token = world.tokens["viewer"]
    called = await loop.run_in_executor(
        None,
        run,
        "-H",
        f"authorization: Bearer {token}",
        "-d",
        '{"pageSize": 1}',
        target,
        "iam.v2beta1.Groups/ListGroups",
    )
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["groups"][0]["name"] == "acme"
    refused = await loop.run_in_executor(None, run, target, "iam.v2beta1.Groups/ListGroups")
    assert refused.returncode != 0 and "Unauthenticated" in refused.stdout + refused.stderr
    # grpcurl decodes the typed details through reflection, as it would the real API's
    assert '"reason":"UNAUTHENTICATED"' in refused.stdout + refused.stderr
    assert token not in listed.stdout + described.stdout + refused.stdout + refused.stderr


def test_generated_code_matches_the_proto_files(tmp_path: Path) -> None:
    """Regenerating with the documented command reproduces the committed modules byte for byte."""
    generate.generate(tmp_path)
    produced = sorted(tmp_path.rglob("*_pb2.py*"))
    assert produced, "protoc produced nothing"
    for path in produced:
        committed = generate.SOURCE_ROOT / path.relative_to(tmp_path)
        assert committed.read_bytes() == path.read_bytes(), f"{committed.name} is stale: run the generator"


@pytest.mark.parametrize("verb", ["GetGroup", "UpdateGroup", "DeleteGroup"])
@pytest.mark.parametrize(
    "escape", ["../identityProviders/{provider}", "../identities/{identity}", "../roles/{role}"]
)
async def test_a_uid_with_dot_segments_stays_in_its_collection(
    world: World, client: Client, verb: str, escape: str
) -> None:
    """Groups/<verb> with a uid "../<other kind>/<uid>" answers HTTP's 404 and leaves that resource be."""
    provider = identity_providers.create(
        world.emulator.resources, world.org.uid, {"name": "gha", "oidc": {"issuer": "https://gha.example"}}
    )
    uids = {"provider": provider.uid, "identity": world.uids["editor"], "role": ROLE_BY_NAME["viewer"].uid}
    uid = escape.format(**uids)
    before = _tables(world)
    requests: dict[str, tuple[Message, str, dict[str, Any] | None]] = {
        "GetGroup": (iam_pb2.GetGroupRequest(uid=uid), "GET", None),
        "UpdateGroup": (
            iam_pb2.UpdateGroupRequest(
                group=iam_pb2.Group(uid=uid, name="taken"), update_mask=FieldMask(paths=["name"])
            ),
            "PATCH",
            {"name": "taken"},
        ),
        "DeleteGroup": (iam_pb2.DeleteGroupRequest(uid=uid), "DELETE", None),
    }
    request, method, body = requests[verb]
    code, status = await client.refusal(
        f"/iam.v2beta1.Groups/{verb}", request, iam_pb2.Group, world.tokens["owner"]
    )
    # the same uid over HTTP, sent as it is (aiohttp would resolve the dot-segments of a str URL)
    query = "?updateMask=name" if body else ""
    url = URL(f"{world.url}/iam/v2beta1/groups/{uid}{query}", encoded=True)
    headers = {"Authorization": f"Bearer {world.tokens['owner']}"}
    async with world.http.request(method, url, json=body, headers=headers) as answer:
        http_status, http_body = answer.status, await answer.json()
    assert (code, http_status) == (grpc.StatusCode.NOT_FOUND, 404)
    assert status == http_body and status["message"] == f"Not found: group {uid}"
    assert _tables(world) == before


def _tables(world: World) -> dict[str, dict[str, dict[str, Any]]]:
    store = world.emulator.store
    tables: dict[str, dict[str, Any]] = {
        "groups": store.groups,
        "identities": store.identities,
        "providers": store.identity_providers,
    }
    return {name: {uid: dataclasses.asdict(r) for uid, r in t.items()} for name, t in tables.items()}
