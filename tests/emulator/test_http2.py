"""HTTP/2 on the emulator's port for what is not gRPC: the same JSON API an HTTP/1.1 client gets."""

from __future__ import annotations

import asyncio
import struct
import subprocess
import tracemalloc
import zlib

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings
import httpx
import pytest

from tokenrelay.emulator.grpcapi import iam_pb2, reflection
from tokenrelay.emulator.iam import groups, identity_providers

from ..support.emulator import World


async def test_httpx_over_http2_reads_and_writes_the_json_api(world: World) -> None:
    """GET and POST over h2c (prior knowledge) answer what HTTP/1.1 answers, on the same store."""
    headers = {"Authorization": f"Bearer {world.tokens['owner']}"}
    async with httpx.AsyncClient(http1=False, http2=True, base_url=world.url, headers=headers) as client:
        made = await client.post(f"/iam/v2beta1/groups/{world.org.uid}", json={"name": "over h2"})
        assert made.http_version == "HTTP/2" and made.status_code == 200, made.text
        listed = await client.get("/iam/v2beta1/groups", params={"name": "over h2"})
        refused = await client.post(f"/iam/v2beta1/groups/{world.org.uid}", json={"name": "NO"})
    status, body = await world.call("GET", "/iam/v2beta1/groups?name=over%20h2")
    assert status == 200 and listed.json() == body
    assert [g["uid"] for g in body["groups"]] == [made.json()["uid"]]
    assert refused.status_code == 400 and refused.json()["code"] == 3


async def test_an_answer_larger_than_the_flow_control_window_arrives_whole(world: World) -> None:
    """A 100 KB list (over HTTP/2's 64 KiB initial window) comes through complete and parseable."""
    for n in range(250):
        groups.create(world.emulator.resources, world.org.uid, {"name": f"g{n:03}", "description": "d" * 300})
    headers = {"Authorization": f"Bearer {world.tokens['viewer']}"}
    async with httpx.AsyncClient(http1=False, http2=True, base_url=world.url, headers=headers) as client:
        answer = await client.get("/iam/v2beta1/groups", params={"page_size": "200"})
    assert len(answer.content) > 65_535
    assert len(answer.json()["groups"]) == 200


@pytest.mark.e2e
async def test_curl_with_http2_prior_knowledge(world: World) -> None:
    """The real curl --http2-prior-knowledge gets the discovery document and an AIP-193 refusal."""

    def curl(*args: str) -> subprocess.CompletedProcess[str]:
        command = ["curl", "-s", "--http2-prior-knowledge", "-w", "\\n%{http_version} %{http_code}", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)

    loop = asyncio.get_running_loop()
    discovery = await loop.run_in_executor(None, curl, world.url + "/.well-known/openid-configuration")
    refused = await loop.run_in_executor(None, curl, world.url + "/iam/v2beta1/groups")
    assert discovery.stdout.endswith("\n2 200") and '"issuer"' in discovery.stdout
    assert refused.stdout.endswith("\n2 401") and '"code": 16' in refused.stdout


async def test_connect_is_refused(world: World) -> None:
    """An HTTP/2 CONNECT (the tunnel method) is answered 405: the emulator is not a relay."""
    host, port = world.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "CONNECT"), (":authority", "example.com:443")], end_stream=True)
    writer.write(conn.data_to_send())
    status = None
    while status is None:
        data = await asyncio.wait_for(reader.read(65536), 10)
        assert data, "the emulator closed the connection without an answer"
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                status = dict(event.headers)[b":status"]
        writer.write(conn.data_to_send())
    writer.close()
    assert status == b"405"


async def test_gzip_compressed_grpc_messages_are_understood(world: World) -> None:
    """A client that gzips its messages (grpcio's channel compression) is served like any other."""
    async with grpc.aio.insecure_channel(
        world.url.removeprefix("http://"), compression=grpc.Compression.Gzip
    ) as channel:
        create = channel.unary_unary(
            "/iam.v2beta1.Groups/CreateGroup",
            request_serializer=iam_pb2.CreateGroupRequest.SerializeToString,
            response_deserializer=iam_pb2.Group.FromString,
        )
        request = iam_pb2.CreateGroupRequest(
            parent=world.org.uid, group=iam_pb2.Group(name="zipped", description="z" * 2000)
        )
        metadata = (("authorization", f"Bearer {world.tokens['owner']}"),)
        made = await create(request, metadata=metadata, timeout=10)
    assert made.description == "z" * 2000


async def test_an_unknown_grpc_method_is_unimplemented(world: World) -> None:
    """A method no service has answers UNIMPLEMENTED naming it."""
    async with grpc.aio.insecure_channel(world.url.removeprefix("http://")) as channel:
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            "/iam.v2beta1.Groups/Frobnicate"
        )
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(b"", timeout=10)
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "/iam.v2beta1.Groups/Frobnicate" in (raised.value.details() or "")


def _gzip(size: int) -> bytes:
    """``size`` zero bytes, gzipped: about a thousandth of that on the wire."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    return b"".join(
        deflater.compress(chunk[: min(size - n, len(chunk))]) for n in range(0, size, len(chunk))
    ) + (deflater.flush())


async def _raw_grpc(world: World, path: str, messages: list[bytes], encoding: str) -> dict[bytes, bytes]:
    """One gRPC call made frame by frame (compressed messages as they are given): its trailers."""
    host, port = world.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 30})
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", f"{host}:{port}"),
        ("content-type", "application/grpc"),
        ("grpc-encoding", encoding),
        ("te", "trailers"),
        ("authorization", f"Bearer {world.tokens['owner']}"),
    ]
    conn.send_headers(1, headers)
    body = b"".join(struct.pack(">?I", True, len(m)) + m for m in messages)
    trailers: dict[bytes, bytes] = {}
    while not trailers:
        while body and (window := min(conn.local_flow_control_window(1), conn.max_outbound_frame_size)):
            conn.send_data(1, body[:window], end_stream=len(body) <= window)
            body = body[window:]
        writer.write(conn.data_to_send())
        data = await asyncio.wait_for(reader.read(65536), 10)
        assert data, "the emulator closed the connection without an answer"
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                fields = dict(event.headers or ())
                if b"grpc-status" in fields:
                    trailers = fields
    writer.close()
    return trailers


@pytest.mark.parametrize(
    ("messages", "encoding"),
    [
        pytest.param([_gzip(64 << 20)], "gzip", id="one message inflating to 64 MiB"),
        pytest.param([zlib.compress(bytes(64 << 20), 9)], "deflate", id="deflate, 64 MiB"),
        pytest.param([_gzip(4 << 20)] * 16, "gzip", id="16 messages inflating to 4 MiB each"),
    ],
)
async def test_a_compressed_message_is_inflated_only_up_to_the_limit(
    world: World, messages: list[bytes], encoding: str
) -> None:
    """A gzip bomb is refused as RESOURCE_EXHAUSTED while the emulator holds about one 4 MiB message."""
    tracemalloc.start()
    try:
        trailers = await _raw_grpc(world, "/iam.v2beta1.Groups/CreateGroup", messages, encoding)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert trailers[b"grpc-status"] == b"8", trailers
    assert b"over 4194304 bytes" in trailers[b"grpc-message"]
    assert peak < 16 << 20, f"{peak >> 20} MiB held to refuse {sum(map(len, messages)) >> 10} KiB"


@pytest.mark.e2e
async def test_a_relayed_path_keeps_its_dot_segments(world: World) -> None:
    """DELETE /groups/../identityProviders/<uid> over h2c answers HTTP/1.1's 404 and deletes nothing."""
    provider = identity_providers.create(
        world.emulator.resources, world.org.uid, {"name": "gha", "oidc": {"issuer": "https://gha.example"}}
    )
    path = f"/iam/v2beta1/groups/../identityProviders/{provider.uid}"
    command = [
        "curl",
        "-s",
        "--path-as-is",
        "-X",
        "DELETE",
        "-H",
        "@-",
        "-w",
        "\\n%{http_version} %{http_code}",
    ]
    authorization = f"Authorization: Bearer {world.tokens['owner']}"

    def curl(*args: str) -> str:
        return subprocess.run(
            [*command, *args, world.url + path],
            input=authorization,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout

    loop = asyncio.get_running_loop()
    over_h2 = await loop.run_in_executor(None, curl, "--http2-prior-knowledge")
    over_h1 = await loop.run_in_executor(None, curl, "--http1.1")
    assert over_h2.endswith("\n2 404") and over_h1.endswith("\n1.1 404")
    assert over_h2.partition("\n")[0] == over_h1.partition("\n")[0]
    assert provider.uid in world.emulator.store.identity_providers


async def test_a_reflection_stream_refuses_a_message_over_the_limit(world: World) -> None:
    """The reflection stream answers a gzip bomb with RESOURCE_EXHAUSTED trailers, not a hung stream."""
    trailers = await _raw_grpc(world, reflection.PATH, [_gzip(64 << 20)], "gzip")
    assert trailers[b"grpc-status"] == b"8", trailers
