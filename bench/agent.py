"""One node agent serving 110 pods of 20 service accounts (the kubelet's default pod limit), against
the real API server of tests/support/k8s.py: real pods on the agent's node, real bound tokens from
the TokenRequest API, every request's token verified against the server's JWKS. The token service
is a loopback FakeTokenService with a short token life, so that refreshes happen during the run.

An open-loop generator sends ``--rate`` requests a second, each as one of the pods with its own
token, on the pod's own keep-alive connection (raw HTTP/1.1 on uvloop), after a warm-up request per
pod (each key's first exchange); latency is measured from each request's scheduled start to the end
of its answer, so a stall counts in full, generator included. Then the agent's RSS, and its CPU time
per request (what a busy machine cannot inflate the way it inflates latency).

    python bench/agent.py [--seconds 60] [--rate 500] [--lifetime 40]

Targets (issue 24): exchanges per key per refresh interval 1 (20 for the node, against 110 with a
sidecar per pod); agent RSS <= 64 MiB; p99 <= 5 ms at 500 requests/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import k8s  # noqa: E402

from tokenrelay.serving.startup import loop_factory  # noqa: E402
from tokenrelay.testing import FakeTokenService, ThreadedServer  # noqa: E402

NODE = "bench-node"
NAMESPACE = "bench"
API = "https://api.example"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def sidecar_rss(work: Path, auth_url: str, id_token: str) -> float:
    """The RSS of one `tokenrelay run` holding its token: what each of the pods would carry."""
    token_file = work / "oidc-token"
    token_file.write_text(id_token)
    socket = work / "sidecar.sock"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work)}
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "tokenrelay", "run", "--auth-url", auth_url, "--api-url", API,
         "--identity", "bench", "--id-token-file", str(token_file), "--socket", str(socket),
         "--log-level", "warning"],
        env=env,
    )  # fmt: skip
    try:
        while not socket.exists():
            time.sleep(0.1)
        from tokenrelay.lite.socketclient import fetch_token

        fetch_token(str(socket))
        time.sleep(1.0)
        return rss_mib(sidecar.pid)
    finally:
        sidecar.terminate()
        sidecar.wait(20)


def cluster(plane: k8s.ControlPlane, pods: int, accounts: int, audience: str) -> list[str]:
    """The namespace, accounts and pods; a bound token per pod (TokenRequest, in-process)."""
    plane.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    plane.ensure({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})  # tokens name it
    for a in range(accounts):
        meta = {"name": f"sa-{a}", "namespace": NAMESPACE}
        plane.ensure({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
    tokens = []
    for p in range(pods):
        account = f"sa-{p % accounts}"
        pod = plane.ensure(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"pod-{p}", "namespace": NAMESPACE},
                "spec": {
                    "serviceAccountName": account,
                    "automountServiceAccountToken": False,
                    "nodeName": NODE,
                    "containers": [{"name": "app", "image": "registry.example/app:1"}],
                },
            }
        )
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience],
                "expirationSeconds": 3600,
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"],
                                   "uid": pod["metadata"]["uid"]},
            },
        }  # fmt: skip
        path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token"
        status, answer = plane.request("POST", path, request)
        assert status == 201, answer
        tokens.append(answer["status"]["token"])
    return tokens


async def load(socket: str, tokens: list[str], rate: float, seconds: float) -> tuple[list[float], list[int]]:
    """Open loop at ``rate``: request i is due at start + i/rate, as pod i % len(tokens), on that
    pod's own keep-alive connection (raw HTTP/1.1, so that the generator costs little)."""
    latencies: list[float] = []
    statuses: list[int] = []
    connections = [await asyncio.open_unix_connection(socket) for _ in tokens]
    locks = [asyncio.Lock() for _ in tokens]
    requests = [
        (
            f"GET /v1/token?identity=bench HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
        for token in tokens
    ]

    async def one(index: int, due: float) -> None:
        reader, writer = connections[index]
        async with locks[index]:
            writer.write(requests[index])
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length)
        latencies.append(time.perf_counter() - due)
        status = int(head.split(b" ", 2)[1])
        statuses.append(status)
        if status != 200 and len(statuses) < 3:
            print(f"# HTTP {status}: {body[:300]!r}", file=sys.stderr)

    # Warm-up, not measured: each pod's first token verified, each key's first exchange made.
    await asyncio.gather(*(one(i, time.perf_counter()) for i in range(len(tokens))))
    latencies.clear()
    statuses.clear()
    start = time.perf_counter()
    tasks: list[asyncio.Task[None]] = []
    for i in range(int(rate * seconds)):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(i % len(tokens), due)))
    await asyncio.gather(*tasks)
    for _, writer in connections:
        writer.close()
    return latencies, statuses


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--lifetime", type=float, default=40.0, help="the API tokens' life, seconds")
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--accounts", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agent-bench-"))
    assets = k8s.find_assets(work)
    if isinstance(assets, str):
        print(assets, file=sys.stderr)
        return 2
    plane = k8s.start(work / "cluster", assets)
    service = FakeTokenService(lifetime=args.lifetime)
    server = ThreadedServer(service.app()).start()
    agent: subprocess.Popen[bytes] | None = None
    try:
        tokens = cluster(plane, args.pods, args.accounts, server.url)
        socket = str(work / "agent.sock")
        env: dict[str, Any] = {**plane.env(), "TOKENRELAY_NODE_NAME": NODE}
        agent = subprocess.Popen(
            [sys.executable, "-m", "tokenrelay", "agent", "--socket", socket, "--auth-url", server.url,
             "--api-url", API, "--log-level", "warning", "--max-requests-per-connection", "1000"],
            env=env, stderr=(work / "agent.log").open("w"),
        )  # fmt: skip
        while not Path(socket).exists():
            if agent.poll() is not None:
                print((work / "agent.log").read_text(), file=sys.stderr)
                return 1
            time.sleep(0.1)
        idle = rss_mib(agent.pid)
        cpu_before = cpu_seconds(agent.pid)
        with asyncio.Runner(loop_factory=loop_factory(True)) as runner:
            latencies, statuses = runner.run(load(socket, tokens, args.rate, args.seconds))
        cpu_ms = (cpu_seconds(agent.pid) - cpu_before) * 1000 / len(latencies)
        rss = rss_mib(agent.pid)
        sidecar = sidecar_rss(work, server.url, tokens[0])
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(20)
        server.stop()
        plane.stop()
    ms = sorted(x * 1000 for x in latencies)
    p50, p99 = statistics.median(ms), ms[int(len(ms) * 0.99) - 1]
    intervals = args.seconds / (args.lifetime * 0.475)  # the refresh comes at 45-50% of the life
    keys = args.accounts
    print(
        f"# {len(ms)} requests, {sum(s != 200 for s in statuses)} not 200; {service.calls} exchanges for "
        f"{keys} keys over {args.seconds:g} s at a {args.lifetime:g} s token life (~{intervals:.1f} "
        f"refresh intervals); sidecars would make {args.pods} per interval",
        file=sys.stderr,
    )
    print(
        f"pods={args.pods} accounts={keys} rate={args.rate:g} p50_ms={p50:.2f} p99_ms={p99:.2f} "
        f"max_ms={ms[-1]:.1f} exchanges={service.calls} "
        f"exchanges_per_interval={service.calls / (intervals + 1):.1f} "
        f"sidecar_exchanges_per_interval={args.pods} agent_rss_mib={rss:.1f} idle_rss_mib={idle:.1f} "
        f"agent_cpu_ms_per_request={cpu_ms:.3f} load_average={os.getloadavg()[0]:.1f} "
        f"sidecar_rss_mib={sidecar:.1f} sidecars_rss_mib={args.pods * sidecar:.0f} "
        f"memory_per_pod_mib=0"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
