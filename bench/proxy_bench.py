"""Benchmark: tokenrelay's proxy against nginx as a reverse proxy, on the same nginx upstream.

    bench/proxy.sh [--runs 3] [--duration 5] [--variants default,asyncio,...] [--tls]

In one run: nginx (a temporary prefix, in the foreground) serves a small JSON page (a) and, in a
second server block, proxies to it with a static Authorization header (b); tokenrelay's proxy (c)
runs in its own process with a token source that serves a fixed token. ``wrk -t1 -c32`` measures
each; the script prints requests/s, p99, the ratio tokenrelay/nginx-proxy and the proxy process's
CPU time per request (user + system, from /proc: less sensitive to a loaded machine than requests/s).
With ``--tls`` the upstream is https (nginx terminating TLS 1.3 with a certificate from a throwaway
CA): (a) is wrk on https directly, (b) nginx ``proxy_pass https://`` with keep-alive, verification
and session reuse, (c) tokenrelay with ``--upstream-ca``; clients still speak plain http to both
proxies. Variants switch off one design choice each, to show what it buys:

  default         uvloop, token held between refreshes, pooled keep-alive upstream connections
  asyncio         asyncio's own event loop instead of uvloop
  no-token-cache  ask the TokenSource on every request (an await, hence a task, per request)
  no-pool         a new upstream connection for every request
  aiohttp         the thinnest aiohttp pass-through (web server + ClientSession), for scale
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

NGINX_WORKERS = 1  # set from --nginx-workers
PAGE = '{"uid":"groups/acme","name":"acme","verified":false}'

NGINX_MAIN = """
daemon off;
master_process {master};
worker_processes {workers};
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    keepalive_requests 1000000;
{http}}}
"""

# The page the proxies fetch, plain and over TLS, and nginx proxying to each (the anchors).
NGINX_SERVERS = """    upstream page {{ server 127.0.0.1:{page}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{page};
        location / {{ default_type application/json; return 200 '{body}'; }}
    }}
    server {{
        listen 127.0.0.1:{proxy};
        location / {{
            proxy_pass http://page;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "Bearer static-benchmark-token";
        }}
    }}
    upstream tls_page {{ server 127.0.0.1:{tls_page}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{tls_page} ssl;
        ssl_certificate {prefix}/cert.pem;
        ssl_certificate_key {prefix}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:tls:1m;
        keepalive_requests 1000000;
        location / {{ default_type application/json; return 200 '{body}'; }}
    }}
    server {{
        listen 127.0.0.1:{tls_proxy};
        location / {{
            proxy_pass https://tls_page;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "Bearer static-benchmark-token";
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate {prefix}/ca.pem;
            proxy_ssl_name 127.0.0.1;
            proxy_ssl_session_reuse on;
        }}
    }}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, deadline: float = 10.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


@contextlib.contextmanager
def run_nginx(prefix: Path, http: str, ports: tuple[int, ...], workers: int = 1) -> Iterator[None]:
    """nginx in the foreground under ``prefix``, ``http`` inside its http block, once ``ports`` listen."""
    conf = prefix / "nginx.conf"
    master = "off" if workers == 1 else "on"
    conf.write_text(NGINX_MAIN.format(prefix=prefix, master=master, workers=workers, http=http))
    proc = subprocess.Popen(["nginx", "-p", str(prefix), "-c", str(conf)], stderr=subprocess.DEVNULL)
    try:
        for port in ports:
            wait_port(port)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def nginx(prefix: Path, page: int, proxy: int, tls_page: int, tls_proxy: int) -> Iterator[None]:
    from tokenrelay.testing import loopback_certificates

    loopback_certificates(prefix)  # ca.pem, cert.pem and key.pem, as the configuration names them
    servers = NGINX_SERVERS.format(
        prefix=prefix, page=page, proxy=proxy, tls_page=tls_page, tls_proxy=tls_proxy, body=PAGE
    )
    with run_nginx(prefix, servers, (page, proxy, tls_page, tls_proxy), NGINX_WORKERS):
        yield


@contextlib.contextmanager
def relay(variant: str, upstream: int, port: int, ca: Path | None) -> Iterator[int]:
    """The relay process, listening on ``port``; yields its pid."""
    command = [sys.executable, __file__, "--serve", variant, "--upstream", str(upstream), "--port", str(port)]
    proc = subprocess.Popen(command + (["--upstream-ca", str(ca)] if ca else []))
    try:
        wait_port(port)
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def wrk(port: int, duration: int, scheme: str = "http") -> tuple[float, float, int]:
    """(requests/s, p99 in ms, requests)."""
    out = subprocess.run(
        ["wrk", "-t1", "-c32", f"-d{duration}s", "--latency", f"{scheme}://127.0.0.1:{port}/v1/page"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return rps, p99, requests


def measure(args: argparse.Namespace) -> int:
    if not shutil.which("nginx") or not shutil.which("wrk"):
        print("needs nginx and wrk: apt-get install -y nginx wrk", file=sys.stderr)
        return 2
    variants = args.variants.split(",")
    ratios: dict[str, list[float]] = {v: [] for v in variants}
    cpus: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="tokenrelay-bench-") as tmp:
        ports = free_port(), free_port(), free_port(), free_port()
        ca = Path(tmp) / "ca.pem" if args.tls else None
        page, nginx_proxy = ports[2:] if args.tls else ports[:2]
        with nginx(Path(tmp), *ports):
            for run in range(1, args.runs + 1):
                direct = wrk(page, args.duration, "https" if args.tls else "http")
                label = "upstream direct (https)" if args.tls else "upstream direct       "
                print(f"run {run}: (a) {label} {direct[0]:6.0f} req/s  p99 {direct[1]:6.2f} ms")
                for variant in variants:
                    # The anchor is measured right before each variant: the machine may be shared,
                    # and a ratio of two measurements minutes apart would mostly measure the neighbours.
                    anchor = wrk(nginx_proxy, args.duration)
                    port = free_port()
                    with relay(variant, page, port, ca) as pid:
                        wrk(port, 1)  # warm up: pool filled, code paths hot
                        cpu = cpu_seconds(pid)
                        rps, p99, requests = wrk(port, args.duration)
                        cpu_us = (cpu_seconds(pid) - cpu) / requests * 1e6
                    ratio = rps / anchor[0]
                    ratios[variant].append(ratio)
                    cpus[variant].append(cpu_us)
                    rps_b, p99_b, _ = anchor
                    print(f"run {run}: (b) nginx proxy           {rps_b:6.0f} req/s  p99 {p99_b:6.2f} ms")
                    print(
                        f"run {run}: (c) tokenrelay {variant:14} {rps:6.0f} req/s  p99 {p99:6.2f} ms  "
                        f"ratio tokenrelay/nginx {ratio:.3f}  proxy CPU {cpu_us:5.1f} us/request"
                    )
    print()
    for variant, values in ratios.items():
        print(
            f"{variant:15} ratio tokenrelay/nginx: median {statistics.median(values):.3f} "
            f"(min {min(values):.3f}, max {max(values):.3f}, {len(values)} runs); "
            f"proxy CPU median {statistics.median(cpus[variant]):.1f} us/request"
        )
    return 0


# -- the relay process ---------------------------------------------------------------------------


def serve(variant: str, upstream: int, port: int, ca: str | None) -> None:
    if variant == "aiohttp":
        serve_aiohttp(upstream, port, ca)
        return
    from tokenrelay.proxy import ProxyServer
    from tokenrelay.proxy.bearer import Bearer
    from tokenrelay.proxy.http1.pool import UpstreamPool
    from tokenrelay.testing import StaticTokenSource

    if variant == "no-token-cache":
        Bearer.current = lambda self: None  # type: ignore[method-assign]
    if variant == "no-pool":
        original = UpstreamPool.release
        UpstreamPool.release = lambda self, conn, reusable: original(self, conn, False)  # type: ignore[method-assign]

    async def main() -> None:
        scheme = "https" if ca else "http"
        url = f"{scheme}://127.0.0.1:{upstream}"
        proxy = ProxyServer(
            url,
            StaticTokenSource(url, "static-benchmark-token"),
            listen=("127.0.0.1", port),
            upstream_ca=ca,
        )
        await proxy.start()
        await asyncio.Event().wait()

    if variant == "asyncio":
        asyncio.run(main())
    else:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())


def serve_aiohttp(upstream: int, port: int, ca: str | None) -> None:
    import ssl

    import aiohttp
    import uvloop
    from aiohttp import web

    async def main() -> None:
        context = ssl.create_default_context(cafile=ca) if ca else None
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64, ssl=context or True))
        scheme = "https" if ca else "http"

        async def handler(request: web.Request) -> web.Response:
            async with session.request(
                request.method,
                f"{scheme}://127.0.0.1:{upstream}{request.path_qs}",
                headers={"Authorization": "Bearer static-benchmark-token"},
                data=await request.read(),
            ) as answer:
                return web.Response(status=answer.status, body=await answer.read())

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--variants", default="default")
    parser.add_argument(
        "--nginx-workers",
        type=int,
        default=1,
        help="nginx worker processes (default 1: one core, like tokenrelay's single event loop)",
    )
    parser.add_argument("--tls", action="store_true", help="an https upstream (nginx terminating TLS)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream-ca", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global NGINX_WORKERS
    NGINX_WORKERS = args.nginx_workers
    if args.serve:
        with contextlib.suppress(KeyboardInterrupt):
            serve(args.serve, args.upstream, args.port, args.upstream_ca)
        return 0
    return measure(args)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
