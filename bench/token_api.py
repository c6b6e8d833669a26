"""GET /v1/token over the Unix socket: requests/s and latency against a bare aiohttp hello-world.

Both servers run as separate processes on Unix sockets and are driven by the same load generator
(32 keep-alive connections, raw HTTP/1.1 on uvloop, so the generator is not the bottleneck), in one
run, alternating rounds so that noise on this shared machine hits both alike. Also reports the idle
RSS of `tokenrelay run` once it holds its tokens.

    python bench/token_api.py [--seconds 5] [--rounds 3] [--clients 32]

Targets (issue 2): ratio >= 0.8; idle RSS <= 40 MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
HELLO = """
import sys
from aiohttp import web
async def hello(request):
    return web.Response(body=b'{"token": "x"}', content_type="application/json")
app = web.Application()
app.router.add_get("/v1/token", hello)
web.run_app(app, path=sys.argv[1], print=None, access_log=None)
"""
FAKE_STS = """
import sys
from aiohttp import web
from tokenrelay.testing import FakeTokenService
web.run_app(FakeTokenService().app(), host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


async def _client(path: str, deadline: float, latencies: list[float]) -> int:
    reader, writer = await asyncio.open_unix_connection(path)
    request = b"GET /v1/token HTTP/1.1\r\nHost: bench\r\n\r\n"
    done = 0
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await reader.readexactly(length)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"unexpected answer: {head[:40]!r}")
        latencies.append(time.perf_counter() - started)
        done += 1
    writer.close()
    return done


async def _load(path: str, seconds: float, clients: int) -> tuple[float, float, float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    counts = await asyncio.gather(*(_client(path, deadline, latencies) for _ in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    return sum(counts) / elapsed, p50, p99


def _wait_for(path: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(500):
        if Path(path).exists():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        time.sleep(0.02)
    raise RuntimeError("server did not start")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        port = _free_port()
        sts = subprocess.Popen([sys.executable, "-c", FAKE_STS, str(port)])
        stack.callback(sts.kill)
        oidc = Path(tmp, "oidc")
        oidc.write_text("eyJhbGciOiJub25lIn0.eyJzdWIiOiJiZW5jaCJ9.sig")
        hello_sock, relay_sock = f"{tmp}/hello.sock", f"{tmp}/relay.sock"
        hello = subprocess.Popen([sys.executable, "-c", HELLO, hello_sock])
        stack.callback(hello.kill)
        time.sleep(0.5)  # let the fake token service bind before the sidecar's first exchange
        relay = subprocess.Popen(
            [
                BIN / "tokenrelay",
                "run",
                "--auth-url",
                f"http://127.0.0.1:{port}",
                "--api-url",
                "https://api.example",
                "--identity",
                "org/bench",
                "--id-token-file",
                str(oidc),
                "--socket",
                relay_sock,
                "--log-level",
                "warning",
            ]
        )
        stack.callback(relay.kill)
        _wait_for(hello_sock, hello)
        _wait_for(relay_sock, relay)

        asyncio.run(_load(relay_sock, 0.5, 4))  # the first token, and warm-up of both
        asyncio.run(_load(hello_sock, 0.5, 4))
        time.sleep(2.0)
        relay_rss, hello_rss = _rss_mib(relay.pid), _rss_mib(hello.pid)

        results: dict[str, list[tuple[float, float, float]]] = {"hello": [], "relay": []}
        for _ in range(args.rounds):
            for name, path in (("hello", hello_sock), ("relay", relay_sock)):
                results[name].append(asyncio.run(_load(path, args.seconds, args.clients)))

    def summary(name: str) -> tuple[float, float, float]:
        rows = results[name]
        return (
            statistics.median(r[0] for r in rows),
            statistics.median(r[1] for r in rows),
            statistics.median(r[2] for r in rows),
        )

    h_rps, h_p50, h_p99 = summary("hello")
    r_rps, r_p50, r_p99 = summary("relay")
    print(f"clients={args.clients} seconds={args.seconds:g} rounds={args.rounds} (medians)")
    print(f"aiohttp hello-world  {h_rps:8.0f} req/s  p50 {h_p50:5.2f} ms  p99 {h_p99:5.2f} ms")
    print(f"tokenrelay /v1/token {r_rps:8.0f} req/s  p50 {r_p50:5.2f} ms  p99 {r_p99:5.2f} ms")
    print(f"ratio tokenrelay/hello = {r_rps / h_rps:.2f} (target >= 0.80)")
    print(
        f"idle RSS: tokenrelay run {relay_rss:.1f} MiB (target <= 40), "
        f"aiohttp hello-world {hello_rss:.1f} MiB, ratio {relay_rss / hello_rss:.2f}"
    )


if __name__ == "__main__":
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
