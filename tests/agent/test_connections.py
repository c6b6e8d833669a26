"""The agent's socket under connections that never finish: a head timeout, an idle timeout, a cap
on connections and one per peer uid, each closing what it refuses at once (issue 28, item 8)."""

from __future__ import annotations

import asyncio

from ..support.agent import AgentRig, Pod
from .conftest import RigFactory

PARTIAL_HEAD = b"GET /v1/token?identity=alice HTTP/1.1\r\nHost: agent\r\n"


async def _open(rig: AgentRig) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(rig.node_agent.settings.socket)


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the agent sends until it closes the connection (a safety bound, not a timing)."""
    return await asyncio.wait_for(reader.read(), timeout=10.0)


async def _opened(rig: AgentRig, count: int) -> None:
    """Until the agent has taken ``count`` connections in (they are accepted asynchronously)."""
    for _ in range(1000):
        if len(rig.node_agent.connections) >= count:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"the agent holds {len(rig.node_agent.connections)} connections, not {count}")


async def test_a_head_that_never_ends_is_answered_408_and_closed(rig_factory: RigFactory) -> None:
    """A connection that sends part of a head and trickles the rest, or sends nothing, is closed with
    a 408 HEAD_TIMEOUT once --head-timeout has passed since its start; the trickle does not extend it."""
    rig = await rig_factory(head_timeout=10.0)
    reader, writer = await _open(rig)
    silent, silent_writer = await _open(rig)
    writer.write(PARTIAL_HEAD)
    await _opened(rig, 2)
    await rig.drift(6.0)
    writer.write(b"X-Trickle: 1\r\n")  # more bytes, still no end of head
    await writer.drain()
    await rig.drift(6.0)
    for closed in (reader, silent):
        answer = await _until_closed(closed)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"HEAD_TIMEOUT" in answer and b"--head-timeout" in answer
    assert len(rig.node_agent.connections) == 0
    registry = rig.node_agent.registry
    assert (
        registry.get_sample_value("tokenrelay_agent_connections_timed_out_total", {"why": "head_timeout"})
        == 2
    )
    for w in (writer, silent_writer):
        w.close()


async def test_an_idle_kept_alive_connection_is_closed(rig_factory: RigFactory) -> None:
    """A connection kept alive after its answer is closed (without an answer) once it has sent
    nothing for --idle-timeout; before that, its next request is served."""
    rig = await rig_factory(head_timeout=5.0, idle_timeout=30.0)
    pod = rig.start_pod(Pod("web-1", "web"))
    head = (
        f"GET /v1/token?identity=alice HTTP/1.1\r\nHost: agent\r\n"
        f"Authorization: Bearer {rig.key.token(pod, rig.auth_url)}\r\n\r\n"
    ).encode()
    reader, writer = await _open(rig)
    for _ in range(2):
        writer.write(head)
        status = await asyncio.wait_for(reader.readline(), timeout=10.0)
        assert status.startswith(b"HTTP/1.1 200 "), status
        length = 0
        while (line := await reader.readline()) != b"\r\n":
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        await rig.drift(20.0)  # idle, but less than --idle-timeout: still open
    await rig.drift(15.0)
    assert await _until_closed(reader) == b""
    writer.close()


async def test_connections_over_the_cap_are_refused_at_once(rig_factory: RigFactory) -> None:
    """With --max-connections 20, 200 connections that send nothing leave 20 open; every other one
    gets a 503 TOO_MANY_CONNECTIONS and is closed at once, and a request is served once one closes."""
    rig = await rig_factory(max_connections=20, max_connections_per_peer=1000)
    pod = rig.start_pod(Pod("web-1", "web"))
    held = [await _open(rig) for _ in range(20)]
    await _opened(rig, 20)
    refused = [await _open(rig) for _ in range(180)]
    answers = await asyncio.gather(*(_until_closed(reader) for reader, _ in refused))
    assert all(a.startswith(b"HTTP/1.1 503 ") and b"TOO_MANY_CONNECTIONS" in a for a in answers)
    assert b"--max-connections" in answers[0]
    assert len(rig.node_agent.connections) == 20
    for _, writer in refused + held[:1]:
        writer.close()
    await rig.client.close()
    for _ in range(1000):
        if len(rig.node_agent.connections) < 20:
            break
        await asyncio.sleep(0.005)
    import aiohttp

    rig.client = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=rig.node_agent.settings.socket))
    assert (await rig.ask(pod)).status == 200
    await rig.client.close()
    for _, writer in held[1:]:
        writer.close()


async def test_one_peer_is_capped_below_the_node(rig_factory: RigFactory) -> None:
    """With --max-connections-per-peer 3, a fourth connection of the same uid gets a 429
    TOO_MANY_CONNECTIONS_FROM_PEER naming the flag, though the node's cap is far off."""
    rig = await rig_factory(max_connections=100, max_connections_per_peer=3)
    held = [await _open(rig) for _ in range(3)]
    await _opened(rig, 3)
    reader, writer = await _open(rig)
    answer = await _until_closed(reader)
    assert answer.startswith(b"HTTP/1.1 429 "), answer
    assert b"TOO_MANY_CONNECTIONS_FROM_PEER" in answer and b"--max-connections-per-peer" in answer
    assert len(rig.node_agent.connections) == 3
    for _, w in [*held, (reader, writer)]:
        w.close()


async def test_listen_over_tcp_is_bounded_too(rig_factory: RigFactory) -> None:
    """--listen's TCP connections have the socket's bounds: past --max-connections-per-peer from one
    address, a 429 and a close; a head that never ends, a 408."""
    rig = await rig_factory(listen=("127.0.0.1", 0), max_connections_per_peer=1, head_timeout=10.0)
    port = rig.node_agent.tcp_port
    assert port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await _opened(rig, 1)
    second, second_writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await _until_closed(second)
    assert answer.startswith(b"HTTP/1.1 429 ") and b"address 127.0.0.1" in answer, answer
    writer.write(PARTIAL_HEAD)
    await writer.drain()
    await rig.drift(11.0)
    assert (await _until_closed(reader)).startswith(b"HTTP/1.1 408 ")
    for w in (writer, second_writer):
        w.close()


async def test_peers_that_fill_the_node_make_room_for_a_peer_with_fewer(rig_factory: RigFactory) -> None:
    """Two peers holding every one of --max-connections with unfinished heads (a root pod can take as
    many uids as it likes, so the per-peer cap alone does not stop it) do not lock out a third: its
    connection takes the place of the oldest unfinished one of the peer holding the most, and its
    pod is served."""
    rig = await rig_factory(listen=("127.0.0.1", 0), max_connections=6, max_connections_per_peer=4)
    pod = rig.start_pod(Pod("web-1", "web"))
    port = rig.node_agent.tcp_port
    assert port is not None

    async def from_address(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))

    crowd = [await from_address("127.0.0.2") for _ in range(4)]
    crowd += [await from_address("127.0.0.3") for _ in range(2)]
    await _opened(rig, 6)
    reader, writer = await from_address("127.0.0.4")
    writer.write(
        (
            f"GET /v1/token?identity=alice HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n"
            f"Authorization: Bearer {rig.key.token(pod, rig.auth_url)}\r\n\r\n"
        ).encode()
    )
    answer = await _until_closed(reader)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert await _until_closed(crowd[0][0]) == b""  # the oldest of the peer holding the most
    for _, w in [*crowd, (reader, writer)]:
        w.close()


async def test_the_metrics_port_is_bounded_too(rig_factory: RigFactory) -> None:
    """--metrics-listen, which any pod of the cluster can reach, has the socket's bounds: a head that
    never ends gets a 408 and a close, one connection past --max-connections-per-peer a 429; the
    probes are still answered."""
    rig = await rig_factory(metrics_listen=("127.0.0.1", 0), max_connections_per_peer=2, head_timeout=10.0)
    metrics = rig.node_agent._metrics
    assert metrics is not None and metrics.port is not None
    port = metrics.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: agent\r\n")
    await writer.drain()
    probe, probe_writer = await asyncio.open_connection("127.0.0.1", port)
    probe_writer.write(b"GET /healthz HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")
    assert (await _until_closed(probe)).startswith(b"HTTP/1.1 200 ")
    held, held_writer = await asyncio.open_connection("127.0.0.1", port)
    extra, extra_writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await _until_closed(extra)
    assert answer.startswith(b"HTTP/1.1 429 ") and b"TOO_MANY_CONNECTIONS_FROM_PEER" in answer, answer
    await rig.drift(11.0)
    for unfinished in (reader, held):
        assert (await _until_closed(unfinished)).startswith(b"HTTP/1.1 408 ")
    for w in (writer, probe_writer, held_writer, extra_writer):
        w.close()
