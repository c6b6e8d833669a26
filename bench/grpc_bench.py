"""Benchmark: gRPC unary calls through tokenrelay's proxy against nginx's grpc_pass, on one nginx upstream.

    bench/grpc.sh [--runs 3] [--duration 5] [--clients 1] [--streams 32] [--rate 1000] [--cpu-calls 10000]

In one run: nginx serves, over h2c, a fixed gRPC answer (one empty message, ``grpc-status: 0`` in
the trailers) to every call (a); a second nginx server block relays calls to it with ``grpc_pass``
and a static ``grpc_set_header authorization`` (b, the anchor); tokenrelay's proxy (c) runs in its
own process with a fixed token (proxy_bench.py's relay). h2load sends the same gRPC frame as a
POST on ``--clients`` connections with ``--streams`` concurrent streams each; the script prints
calls/s, p99 (from h2load's per-request log), the ratio tokenrelay/nginx, and the proxy's RSS idle
(before any call) and after the calls (h2 loaded).

At full speed every call also waits for the 31 others in flight (p99 is about streams / calls/s), so
the script measures p99 a second way: (b) and (c) at a fixed offered load of ``--rate`` calls/s (h2load
``--rps``, still up to ``--streams`` in flight). It also prints the proxy's CPU time per call (user +
system, over ``--cpu-calls`` calls), the figure that noise on a shared machine moves least, and the load
average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from proxy_bench import free_port, run_nginx, wait_port

# nginx serving the fixed gRPC answer over h2c, and relaying to it with grpc_pass (the anchor).
NGINX_SERVERS = """    upstream grpc_upstream {{ server 127.0.0.1:{upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{upstream} http2;
        location / {{
            root {prefix};
            default_type application/grpc;
            add_trailer grpc-status 0;
            # closer to a gRPC server's answer: no static-file validators or range support
            etag off;
            max_ranges 0;
            # the static module refuses POST: serve the file anyway
            error_page 405 =200 /answer.bin;
            try_files /answer.bin =404;
        }}
    }}
    server {{
        listen 127.0.0.1:{anchor} http2;
        location / {{
            grpc_pass grpc://grpc_upstream;
            grpc_set_header authorization "Bearer static-benchmark-token";
        }}
    }}
"""

FRAME = b"\x00\x00\x00\x00\x00"  # one gRPC message of zero bytes (an empty protobuf message)
PATH = "/bench.Echo/Unary"


@contextlib.contextmanager
def nginx(prefix: Path, upstream: int, anchor: int) -> Iterator[None]:
    (prefix / "answer.bin").write_bytes(FRAME)
    servers = NGINX_SERVERS.format(prefix=prefix, upstream=upstream, anchor=anchor)
    with run_nginx(prefix, servers, (upstream, anchor)):
        yield


def h2load(
    port: int, args: argparse.Namespace, duration: int, tmp: Path, *, rate: int = 0, calls: int = 0
) -> tuple[float, float]:
    """(calls/s, p99 in ms); every call must have answered 200. ``rate``: offered calls/s per connection;
    ``calls``: that many calls instead of ``duration`` seconds."""
    log = tmp / "h2load.log"
    log.unlink(missing_ok=True)
    length = [f"-n{calls}"] if calls else [f"-D{duration}", "--warm-up-time=1"]
    out = subprocess.run(
        [
            "h2load",
            f"-c{args.clients}",
            f"-m{args.streams}",
            *length,
            *([f"--rps={rate}"] if rate else []),
            "-d",
            str(tmp / "request.bin"),
            "-H",
            "content-type: application/grpc",
            "-H",
            "te: trailers",
            f"--log-file={log}",
            f"http://127.0.0.1:{port}{PATH}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))  # type: ignore[union-attr]
    failed = re.search(r"(\d+) failed, (\d+) errored, (\d+) timeout", out).groups()  # type: ignore[union-attr]
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out).groups()  # type: ignore[union-attr]
    if set(failed) != {"0"} or set(codes[1:]) != {"0"} or codes[0] == "0":
        raise RuntimeError(f"calls failed:\n{out}")
    times = sorted(int(line.split("\t")[2]) for line in log.read_text().splitlines() if line)
    p99 = times[int(len(times) * 0.99) - 1] / 1000
    return rps, p99


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def relay(upstream: int, port: int) -> Iterator[int]:
    """tokenrelay's proxy with a fixed token (proxy_bench.py's relay process); yields its pid."""
    script = Path(__file__).with_name("proxy_bench.py")
    command = [
        sys.executable,
        str(script),
        "--serve",
        "default",
        "--upstream",
        str(upstream),
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(command)
    try:
        wait_port(port)
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def measure(args: argparse.Namespace) -> int:
    if not shutil.which("nginx") or not shutil.which("h2load"):
        print("needs nginx and h2load: apt-get install -y nginx nghttp2-client", file=sys.stderr)
        return 2
    ratios: list[float] = []
    p99s: list[float] = []
    rated: list[tuple[float, float]] = []  # p99 at --rate: (nginx, tokenrelay)
    cpus: list[float] = []
    print("load average " + " ".join(f"{load:.2f}" for load in os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="tokenrelay-grpc-bench-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "request.bin").write_bytes(b"\x00\x00\x00\x00\x05" + b"\x0a\x03abc")
        upstream, anchor = free_port(), free_port()
        streams = args.clients * args.streams
        with nginx(tmp, upstream, anchor):
            for run in range(1, args.runs + 1):
                direct = h2load(upstream, args, args.duration, tmp)
                print(f"run {run}: (a) upstream direct  {direct[0]:6.0f} calls/s  p99 {direct[1]:6.2f} ms")
                nginx_rps, nginx_p99 = h2load(anchor, args, args.duration, tmp)
                print(f"run {run}: (b) nginx grpc_pass  {nginx_rps:6.0f} calls/s  p99 {nginx_p99:6.2f} ms")
                port = free_port()
                with relay(upstream, port) as pid:
                    idle = rss_mib(pid)
                    h2load(port, args, 1, tmp)  # warm up: upstream connection open, code paths hot
                    rps, p99 = h2load(port, args, args.duration, tmp)
                    loaded = rss_mib(pid)
                    before = cpu_seconds(pid)
                    h2load(port, args, 0, tmp, calls=args.cpu_calls)
                    cpu = (cpu_seconds(pid) - before) / args.cpu_calls * 1e6
                    rate_p99 = h2load(port, args, args.duration, tmp, rate=args.rate)[1]
                nginx_rate_p99 = h2load(anchor, args, args.duration, tmp, rate=args.rate)[1]
                ratio = rps / nginx_rps
                ratios.append(ratio)
                p99s.append(p99)
                cpus.append(cpu)
                rated.append((nginx_rate_p99, rate_p99))
                print(
                    f"run {run}: (c) tokenrelay       {rps:6.0f} calls/s  p99 {p99:6.2f} ms  "
                    f"ratio tokenrelay/nginx {ratio:.3f}  RSS idle {idle:.1f} MiB, after {loaded:.1f} MiB  "
                    f"CPU {cpu:.0f} us/call"
                )
                print(
                    f"run {run}: at {args.rate} calls/s: p99 nginx {nginx_rate_p99:.2f} ms, "
                    f"tokenrelay {rate_p99:.2f} ms"
                )
    print("load average " + " ".join(f"{load:.2f}" for load in os.getloadavg()))
    print()
    print(
        f"{streams} streams: ratio tokenrelay/nginx median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}); "
        f"tokenrelay p99 median {statistics.median(p99s):.2f} ms "
        f"({len(ratios)} runs; targets >= 0.65, <= 5 ms)"
    )
    print(
        f"at {args.rate} calls/s: p99 median nginx {statistics.median(r[0] for r in rated):.2f} ms, "
        f"tokenrelay {statistics.median(r[1] for r in rated):.2f} ms "
        f"(max {max(r[1] for r in rated):.2f}); proxy CPU median {statistics.median(cpus):.0f} us/call "
        f"(min {min(cpus):.0f}, max {max(cpus):.0f}; target <= 110 on a quiet machine)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--clients", type=int, default=1, help="h2load connections")
    parser.add_argument("--streams", type=int, default=32, help="concurrent streams per connection")
    parser.add_argument("--rate", type=int, default=1000, help="offered calls/s for the second p99")
    parser.add_argument("--cpu-calls", type=int, default=10000, help="calls over which to time the CPU")
    return measure(parser.parse_args())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
