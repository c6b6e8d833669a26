"""The node agent as a user runs it (``tokenrelay agent``, a subprocess) against the real API server
of ``control_plane``: real pods with ``spec.nodeName``, real bound tokens from the TokenRequest API,
the server's real JWKS, the agent's own service account under real RBAC. The token service is a
FakeTokenService on loopback that counts exchanges and refuses the identity ``untrusting``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tokenrelay.lite import aip193
from tokenrelay.testing import FakeTokenService, ThreadedServer, refusal

from ..support.agent import AgentRig, start_rig
from ..support.k8s import ControlPlane
from ..support.paths import short_dir

NAMESPACE = "agent-e2e"
NODE = "node-a"
OTHER_NODE = "node-b"
API = "https://api.example"
UNTRUSTING = "untrusting"
STARTUP_TAINT = "tokenrelay.dev/agent-not-ready"
Doc = dict[str, Any]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def reason(self) -> str:
        parsed = aip193.parse(self.body)
        assert parsed is not None, self.body
        return parsed[2]

    @property
    def message(self) -> str:
        parsed = aip193.parse(self.body)
        assert parsed is not None, self.body
        return parsed[1]


@dataclass
class Cluster:
    """The control plane with the test's namespace, accounts, nodes and pods, and the agent running."""

    plane: ControlPlane
    service: FakeTokenService
    auth_url: str
    socket: str
    metrics: str
    directory: Path
    pods: dict[str, Doc] = field(default_factory=dict)

    def pod(self, name: str, account: str, node: str = NODE) -> Doc:
        """A Pod bound to ``node`` (nothing runs it: there is no kubelet, and it need not)."""
        stored = self.plane.ensure(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "serviceAccountName": account,
                    "automountServiceAccountToken": False,
                    "nodeName": node,
                    "containers": [{"name": "app", "image": "registry.example/app:1"}],
                },
            }
        )
        self.pods[name] = stored
        return stored

    def token(self, pod: str, audience: str | None = None, duration: str = "1h") -> str:
        """A real bound token of the pod's service account, from the TokenRequest API."""
        stored = self.pods[pod]
        args = [
            "create", "token", stored["spec"]["serviceAccountName"], "-n", NAMESPACE,
            "--bound-object-kind", "Pod", "--bound-object-name", pod,
            "--bound-object-uid", stored["metadata"]["uid"],
            f"--audience={audience or self.auth_url}", f"--duration={duration}",
        ]  # fmt: skip
        return self.plane.kubectl(*args).stdout.strip()

    def ask(
        self, token: str | None, identity: str | None = "alice", audience: str | None = None, accept: str = ""
    ) -> Reply:
        """One GET /v1/token on the agent's socket with ``token`` as the bearer."""
        query = []
        if audience:
            query.append(f"audience={audience}")
        if identity is not None:
            query.append(f"identity={identity}")
        head = f"GET /v1/token{'?' + '&'.join(query) if query else ''} HTTP/1.1\r\nHost: agent\r\n"
        if token is not None:
            head += f"Authorization: Bearer {token}\r\n"
        if accept:
            head += f"Accept: {accept}\r\n"
        head += "Connection: close\r\n\r\n"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(self.socket)
            sock.sendall(head.encode())
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
        top, _, body = raw.partition(b"\r\n\r\n")
        lines = top.decode().split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return Reply(int(lines[0].split()[1]), headers, body)


def _rbac(namespace: str) -> list[Doc]:
    """The agent's rights: watch pods, read and untaint nodes. Nothing to mint tokens with."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent", "namespace": namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "tokenrelay-agent-e2e"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "tokenrelay-agent-e2e"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "tokenrelay-agent-e2e",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": namespace}],
        },
    ]


def _node(name: str) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {
            "taints": [
                {"key": STARTUP_TAINT, "effect": "NoSchedule"},
                {"key": "example.com/keep-me", "value": "yes", "effect": "NoSchedule"},
            ]
        },
    }


async def _untrusting(request: web.Request) -> web.StreamResponse | None:
    if request.query.get("identity") == UNTRUSTING:
        return refusal(
            aip193.Code.PERMISSION_DENIED,
            "identity untrusting does not trust this service account",
            403,
            "IDENTITY_NOT_TRUSTED",
        )
    return None


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("agent")
    service = FakeTokenService(behaviour=_untrusting)
    server = ThreadedServer(service.app()).start()
    plane = control_plane
    plane.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for account in ("alpha", "beta"):
        plane.ensure(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": NAMESPACE},
            }
        )
    plane.apply(_rbac(NAMESPACE))
    for node in (NODE, OTHER_NODE):
        plane.apply([_node(node)])
    agent_token = plane.token(NAMESPACE, "agent")
    kubeconfig = plane.kubeconfig_for_token(agent_token, directory / "agent.kubeconfig")
    metrics_port = free_port()
    state = Cluster(
        plane,
        service,
        server.url,
        str(directory / "run" / "agent.sock"),
        f"http://127.0.0.1:{metrics_port}",
        directory,
    )
    env = plane.env(kubeconfig)
    env.update(
        TOKENRELAY_NODE_NAME=NODE,
        TOKENRELAY_AUTH_URL=server.url,
        TOKENRELAY_API_URL=API,
    )
    log = (directory / "agent.log").open("w")
    agent = subprocess.Popen(
        [
            sys.executable, "-m", "tokenrelay", "agent", "--socket", state.socket,
            "--metrics-listen", f"127.0.0.1:{metrics_port}", "--startup-taint", "--log-format", "text",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for(lambda: os.path.exists(state.socket) or agent.poll() is not None, "the agent's socket")
        if agent.poll() is not None:
            pytest.fail(f"the agent exited: {(directory / 'agent.log').read_text()[-3000:]}")
        yield state
    finally:
        agent.terminate()
        status = agent.wait(20)
        log.close()
        server.stop()
    # After every test of the module: SIGTERM is a clean exit that removes the socket, and no token
    # the agent handled (pods', the service's) is in its log.
    assert status == 0
    assert not os.path.exists(state.socket)
    text = (directory / "agent.log").read_text()
    for secret in {*service.issued, *service.seen_id_tokens}:
        assert secret.split(".")[1] not in text, "a token is in the agent's log"


RigFactory = Callable[..., Awaitable[AgentRig]]


@pytest.fixture
async def rig_factory() -> AsyncIterator[RigFactory]:
    """The agent in-process on a FakeClock (tests/support/agent.py), with the settings a test gives."""
    cleanups: list[Any] = []

    async def build(**settings: Any) -> AgentRig:
        rig, done = await start_rig(short_dir(), **settings)
        cleanups.extend(done)
        return rig

    yield build
    for cleanup in cleanups:
        with contextlib.suppress(Exception):
            await cleanup()
