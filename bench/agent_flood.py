"""A flood of unfinished connections at the node agent's socket while another pod keeps asking
(issue 28, item 8), against the real API server of tests/support/k8s.py as bench/agent.py runs it.

A "flooder" pod (a process as uid 65534, another peer than the asking pod's) makes ``--attempts``
connection attempts at ``--flood-rate`` a second; each sends part of a request head and never
finishes it, and is held open up to ``--hold`` seconds, at most ``--concurrency`` at once (the
flooder's descriptors), then closed. Meanwhile the asking pod (this process, uid 0) sends a request
every ``--interval`` seconds, each on a new connection as our clients do, with its own bound token.

Printed: the agent's RSS before the flood, its peak during it and what it holds ``--settle``
seconds after; its open descriptors likewise; and the asking pod's p50/p99/max latency and its
answers that were not 200, before and during the flood.

    python bench/agent_flood.py [--attempts 50000] [--flood-rate 5000] [--hold 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import k8s  # noqa: E402

# bench/agent.py's cluster: the node, a namespace, an account and its pods with their bound tokens
from agent import NODE, cluster, rss_mib  # noqa: E402
from tokenrelay.testing import FakeTokenService, ThreadedServer  # noqa: E402

API = "https://api.example"
FLOODER_UID = 65534
# The flooder needs the standard library only, from an interpreter that user may run (pyenv's, under
# /root, it may not).
FLOODER_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

# The flooder: it runs as another user (another peer of the socket's), standard library only.
FLOODER = r"""
import collections, socket, sys, time
path = sys.argv[1]
attempts, rate, hold, concurrency = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
head = b"GET /v1/token?identity=flood HTTP/1.1\r\nHost: agent\r\nX-Never: "
held = collections.deque()
failed = 0
start = time.monotonic()
for i in range(attempts):
    now = time.monotonic()
    ahead = start + i / rate - now
    if ahead > 0.002:
        time.sleep(ahead)
        now = time.monotonic()
    while held and (held[0][0] <= now or len(held) >= concurrency):
        held.popleft()[1].close()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2.0)
    try:
        s.connect(path)
        s.send(head)
    except OSError:
        failed += 1
        s.close()
        continue
    held.append((now + hold, s))
elapsed = time.monotonic() - start
while held:
    deadline, s = held.popleft()
    time.sleep(max(0.0, deadline - time.monotonic()))
    s.close()
print(f"flood_attempts={attempts} flood_failed={failed} flood_seconds={elapsed:.1f}")
"""


def descriptors(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def ask(path: str, token: str) -> int:
    """One request on a new connection, as the pod's clients make it; its status (0: no answer)."""
    import socket

    request = (
        f"GET /v1/token?identity=bench HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30.0)
            sock.connect(path)
            sock.sendall(request)
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
        return int(raw.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return 0


class Asker(threading.Thread):
    """The other pod: a request every ``interval`` seconds until stopped; (start, latency, status)."""

    def __init__(self, path: str, token: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.path, self.token, self.interval = path, token, interval
        self.stopping = threading.Event()
        self.results: list[tuple[float, float, int]] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            status = ask(self.path, self.token)
            self.results.append((began, time.monotonic() - began, status))
            self.stopping.wait(max(0.0, self.interval - (time.monotonic() - began)))


def summary(results: list[tuple[float, float, int]], start: float, end: float) -> str:
    window = [(latency * 1000, status) for began, latency, status in results if start <= began < end]
    if not window:
        return "none"
    ms = sorted(latency for latency, _ in window)
    p99 = ms[max(0, int(len(ms) * 0.99) - 1)]
    not_ok = sorted(status for _, status in window if status != 200)  # 0: no answer
    seen = " ".join(f"{status}x{not_ok.count(status)}" for status in sorted(set(not_ok)))
    p50 = statistics.median(ms)
    said = f"n={len(ms)} p50_ms={p50:.2f} p99_ms={p99:.2f} max_ms={ms[-1]:.1f} not_200={len(not_ok)}"
    return f"{said} ({seen})" if seen else said


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attempts", type=int, default=50_000)
    parser.add_argument("--flood-rate", type=float, default=5000.0, help="connection attempts a second")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds each connection is held at most")
    parser.add_argument(
        "--concurrency", type=int, default=15_000, help="connections the flooder holds at most"
    )
    parser.add_argument(
        "--interval", type=float, default=0.05, help="seconds between the other pod's requests"
    )
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after the flood before 'after'")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agent-flood-"))
    work.chmod(0o755)  # the flooder, another user, reaches the socket through it
    assets = k8s.find_assets(work)
    if isinstance(assets, str):
        print(assets, file=sys.stderr)
        return 2
    plane = k8s.start(work / "cluster", assets)
    service = FakeTokenService(lifetime=3600)
    server = ThreadedServer(service.app()).start()
    agent: subprocess.Popen[bytes] | None = None
    try:
        (token,) = cluster(plane, 1, 1, server.url)
        path = str(work / "agent.sock")
        env: dict[str, Any] = {**plane.env(), "TOKENRELAY_NODE_NAME": NODE}
        agent = subprocess.Popen(
            [sys.executable, "-m", "tokenrelay", "agent", "--socket", path, "--auth-url", server.url,
             "--api-url", API, "--log-level", "warning"],
            env=env, stderr=(work / "agent.log").open("w"),
        )  # fmt: skip
        while not Path(path).exists():
            if agent.poll() is not None:
                print((work / "agent.log").read_text(), file=sys.stderr)
                return 1
            time.sleep(0.1)
        assert ask(path, token) == 200, "the asking pod's first request failed"
        time.sleep(2.0)
        rss_before, fds_before = rss_mib(agent.pid), descriptors(agent.pid)
        asker = Asker(path, token, args.interval)
        asker.start()
        time.sleep(3.0)
        flood_start = time.monotonic()
        flooder = subprocess.Popen(
            [FLOODER_PYTHON, "-I", "-c", FLOODER, path, str(args.attempts), str(args.flood_rate),
             str(args.hold), str(args.concurrency)],
            user=FLOODER_UID, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        rss_peak, fds_peak = rss_before, fds_before
        while flooder.poll() is None:
            rss_peak, fds_peak = max(rss_peak, rss_mib(agent.pid)), max(fds_peak, descriptors(agent.pid))
            time.sleep(0.25)
        flood_end = time.monotonic()
        flood_line = (flooder.stdout.read() if flooder.stdout else "").strip()
        time.sleep(args.settle)
        rss_after, fds_after = rss_mib(agent.pid), descriptors(agent.pid)
        asker.stopping.set()
        asker.join()
        alive = agent.poll() is None
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(20)
        server.stop()
        plane.stop()
    print(f"# {flood_line}; the agent {'survived' if alive else 'DIED'}", file=sys.stderr)
    print(
        f"attempts={args.attempts} flood_rate={args.flood_rate:g} hold_s={args.hold:g} "
        f"rss_before_mib={rss_before:.1f} rss_peak_mib={rss_peak:.1f} rss_after_mib={rss_after:.1f} "
        f"fds_before={fds_before} fds_peak={fds_peak} fds_after={fds_after} "
        f"load_average={os.getloadavg()[0]:.1f}\n"
        f"asking pod before the flood: {summary(asker.results, 0.0, flood_start)}\n"
        f"asking pod during the flood ({flood_end - flood_start:.1f} s): "
        f"{summary(asker.results, flood_start, flood_end)}\n"
        f"asking pod after the flood: {summary(asker.results, flood_end, float('inf'))}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
