"""The node agent in-process on a FakeClock, for the chaos tests: ``service.NodeAgent`` itself, with
its JWKS and its node's pods given by the test instead of an API server (the tests in tests/agent run
it against a real one). Pod tokens are real ES256 JWTs with a bound pod token's claims, signed with
a key of the test's whose JWKS the agent loads, so every request's token is really verified."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from tokenrelay.agent.options import AgentSettings
from tokenrelay.agent.pods import NodePods
from tokenrelay.agent.service import NodeAgent
from tokenrelay.lite import aip193
from tokenrelay.testing import FakeClock, FakeTokenService

ISSUER = "https://kubernetes.default.svc"
NODE = "node-a"
API = "https://api.example"
KID = "test-key"


@dataclass(frozen=True)
class Pod:
    name: str
    service_account: str
    namespace: str = "apps"
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    node: str = NODE


class ClusterKey:
    """The cluster's signing key, as the tests hold it: the JWKS the agent loads, and pod tokens."""

    def __init__(self) -> None:
        self.rotate()

    def rotate(self) -> None:
        """A new key under the same kid: the JWKS the agent loads from now on publishes only it."""
        self.private = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key()))
        self.jwks = json.dumps({"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "ES256"}]}).encode()

    def token(self, pod: Pod, audience: str, *, now: float | None = None, life: float = 3600.0) -> str:
        iat = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": [audience],
            "iat": iat,
            "nbf": iat,
            "exp": iat + int(life),
            "sub": f"system:serviceaccount:{pod.namespace}:{pod.service_account}",
            "kubernetes.io": {
                "namespace": pod.namespace,
                "node": {"name": pod.node, "uid": "node-uid"},
                "pod": {"name": pod.name, "uid": pod.uid},
                "serviceaccount": {"name": pod.service_account, "uid": "sa-uid"},
            },
        }
        return jwt.encode(claims, self.private, algorithm="ES256", headers={"kid": KID})


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]

    @property
    def token(self) -> str:
        value: str = json.loads(self.body)["token"]
        return value

    @property
    def reason(self) -> str:
        parsed = aip193.parse(self.body)
        return parsed[2] if parsed else ""


@dataclass
class AgentRig:
    clock: FakeClock
    service: FakeTokenService
    key: ClusterKey
    node_agent: NodeAgent
    client: aiohttp.ClientSession
    auth_url: str
    running: set[str] = field(default_factory=set)

    @property
    def pods(self) -> NodePods:
        return self.node_agent.pods

    def start_pod(self, pod: Pod) -> Pod:
        self.running.add(pod.uid)
        self.pods.seen("ADDED", pod.uid, "Running")
        return pod

    def delete_pod(self, pod: Pod) -> None:
        self.running.discard(pod.uid)
        self.pods.seen("DELETED", pod.uid, "Running")

    async def ask(
        self, pod: Pod, identity: str = "alice", audience: str | None = None, token: str | None = None
    ) -> Answer:
        """GET /v1/token as the pod, with a token kubelet would have written for it just now."""
        bearer = token if token is not None else self.key.token(pod, self.auth_url)
        params = {"identity": identity, **({"audience": audience} if audience else {})}
        async with self.client.get(
            "http://agent/v1/token", params=params, headers={"Authorization": f"Bearer {bearer}"}
        ) as response:
            return Answer(response.status, await response.read(), dict(response.headers))

    def exchanging(self) -> bool:
        return any(p.exchanging for p in self.node_agent.exchanges.providers())

    async def settle(self) -> None:
        """Until every key's schedule and the sweep are parked on the fake clock again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        quiet = 0
        while quiet < 2:  # keys come and go meanwhile (the sweep): count them at every look
            # the sweep, the keys' re-read, and a schedule per key
            parked = self.clock.sleeping >= 2 + len(self.node_agent.exchanges) and not self.exchanging()
            quiet = quiet + 1 if parked else 0
            assert loop.time() < deadline, "the agent's schedules did not settle within 10s"
            await asyncio.sleep(0.001)

    async def drift(self, seconds: float, step: float = 1.0) -> None:
        """Move the clock without waiting for exchanges to end (some wait for the limiter)."""
        remaining = seconds
        while remaining > 0:
            delta = min(step, remaining)
            self.clock.tick(delta)
            remaining -= delta
            for _ in range(20):
                await asyncio.sleep(0.001)

    async def advance(self, seconds: float, step: float = 5.0) -> None:
        remaining = seconds
        while remaining > 0:
            delta = min(step, remaining)
            self.clock.tick(delta)
            remaining -= delta
            await self.settle()


async def start_rig(
    directory: Path, *, lifetime: float = 600.0, seed: int = 7, **settings: Any
) -> tuple[AgentRig, list[Any]]:
    """An AgentRig and the cleanups to run, in order."""
    from aiohttp.test_utils import TestServer

    clock = FakeClock()
    service = FakeTokenService(lifetime=lifetime, wall=clock.wall)
    server = TestServer(service.app())
    await server.start_server()
    auth_url = str(server.make_url("")).rstrip("/")
    key = ClusterKey()

    async def keys() -> bytes:
        return key.jwks

    async def pods(node_pods: NodePods) -> None:
        node_pods.replace(())
        await asyncio.Event().wait()

    config = AgentSettings(
        auth_url=auth_url,
        api_url=API,
        node_name=NODE,
        socket=str(directory / "agent.sock"),
        cluster_issuer=ISSUER,
        wait_timeout=5.0,
        exchange_timeout=5.0,
        shutdown_grace=1.0,
        **settings,
    )
    node_agent = NodeAgent(
        config,
        clock=clock,
        wall=clock.wall,
        sleep=clock.sleep,
        rng=random.Random(seed),
        keys=keys,
        pod_source=pods,
    )
    await node_agent.start()
    client = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=config.socket, limit=256))
    rig = AgentRig(clock, service, key, node_agent, client, auth_url)
    return rig, [client.close, node_agent.stop, server.close]
