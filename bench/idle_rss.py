"""Idle RSS of `tokenrelay run --proxy-listen ...`: a sidecar with its proxy on, holding a token, idle.

Starts tokenrelay.testing's FakeTokenService, then, --runs times, a fresh `tokenrelay run` with the
proxy on; waits for its socket, takes a token over the local API, sends one request through the proxy
(to the fake service, which answers it), lets it settle for --settle seconds and reads /proc/PID/status
and smaps_rollup. Prints each run and the medians: VmRSS (the figure issues 10 and 11 hold under 40
MiB), its anonymous and file-backed parts, and how many modules the sidecar loaded.

    python bench/idle_rss.py [--runs 5] [--settle 2] [--tls] [--no-proxy] [--show-modules]

With `--tls` the --api-url is https (a second fake service with a certificate from a throwaway CA,
given as --upstream-ca), as in production: the proxy then holds a TLS context and a TLS connection.
With `--no-proxy` the sidecar runs without --proxy-listen (and no request goes through a proxy): the
figure a sidecar that only serves its socket must not grow past.

`--show-modules` prints the sidecar's sys.modules top-level packages once (through a sitecustomize
hook in a temporary directory on PYTHONPATH that dumps sys.modules on SIGUSR1), to see what the idle
sidecar loads.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
FAKE_STS = """
import sys
from aiohttp import web
from tokenrelay.testing import FakeTokenService
tls = None
if len(sys.argv) > 2:  # serve https with this certificate directory's cert.pem and key.pem
    import ssl
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(f"{sys.argv[2]}/cert.pem", f"{sys.argv[2]}/key.pem")
web.run_app(FakeTokenService().app(), host="127.0.0.1", port=int(sys.argv[1]), ssl_context=tls, print=None)
"""
# Loaded into the sidecar only with --show-modules: on SIGUSR1, write sys.modules' names to a file.
DUMP_MODULES = """
import os, signal, sys
def _dump(signum, frame):
    with open(os.environ["IDLE_RSS_MODULES"], "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
signal.signal(signal.SIGUSR1, _dump)
"""
TARGET_MIB = 40.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(500):
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port}")


def _wait_path(path: Path, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(500):
        if path.exists():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"tokenrelay run exited with {proc.returncode}")
        time.sleep(0.02)
    raise RuntimeError("tokenrelay run did not create its socket")


def _token(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(path))
        s.sendall(b"GET /v1/token HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"no token: {answer[:60]!r}")


def _through_proxy(port: int) -> None:
    """One request through the proxy; any HTTP answer from the fake service will do."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/anything")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        exc.read()


def _memory(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile from /proc/PID/status, in MiB."""
    figures: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            figures[key] = int(value.split()[0]) / 1024
    return figures


def _one_run(
    sts_port: int,
    api: list[str],
    oidc: Path,
    tmp: Path,
    settle: float,
    modules: Path | None,
    proxy: bool = True,
) -> dict[str, float]:
    sock, proxy_port = tmp / "relay.sock", _free_port()
    listen = ["--proxy-listen", f"127.0.0.1:{proxy_port}"] if proxy else []
    env = dict(os.environ)
    if modules is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp / "hook"), env.get("PYTHONPATH")]))
        env["IDLE_RSS_MODULES"] = str(modules)
    relay = subprocess.Popen(
        [
            str(BIN / "tokenrelay"),
            "run",
            "--auth-url",
            f"http://127.0.0.1:{sts_port}",
            *api,
            "--identity",
            "org/bench",
            "--id-token-file",
            str(oidc),
            "--socket",
            str(sock),
            *listen,
            "--log-level",
            "warning",
        ],
        env=env,
    )
    try:
        _wait_path(sock, relay)
        _token(sock)
        if proxy:
            _through_proxy(proxy_port)
        time.sleep(settle)
        figures = _memory(relay.pid)
        if modules is not None:
            relay.send_signal(signal.SIGUSR1)
            for _ in range(100):
                if modules.exists():
                    break
                time.sleep(0.02)
            names = modules.read_text().split()
            figures["modules"] = len(names)
            tops = sorted({name.split(".")[0] for name in names if not name.startswith("_")})
            print("top-level modules loaded:", " ".join(tops))
        return figures
    finally:
        relay.terminate()
        relay.wait(10)
        sock.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds idle before reading RSS")
    parser.add_argument("--tls", action="store_true", help="an https --api-url")
    parser.add_argument("--no-proxy", action="store_true", help="the sidecar without --proxy-listen")
    parser.add_argument("--show-modules", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        sts_port = _free_port()
        sts = subprocess.Popen([sys.executable, "-c", FAKE_STS, str(sts_port)])
        stack.callback(sts.kill)
        _wait_port(sts_port, sts)
        api = ["--api-url", f"http://127.0.0.1:{sts_port}"]
        if args.tls:
            from tokenrelay.testing import loopback_certificates

            loopback_certificates(tmp)
            api_port = _free_port()
            api_sts = subprocess.Popen([sys.executable, "-c", FAKE_STS, str(api_port), str(tmp)])
            stack.callback(api_sts.kill)
            _wait_port(api_port, api_sts)
            api = ["--api-url", f"https://127.0.0.1:{api_port}", "--upstream-ca", str(tmp / "ca.pem")]
        oidc = tmp / "oidc"
        oidc.write_text("eyJhbGciOiJub25lIn0.eyJzdWIiOiJiZW5jaCJ9.sig")
        modules = None
        if args.show_modules:
            (tmp / "hook").mkdir()
            (tmp / "hook" / "sitecustomize.py").write_text(DUMP_MODULES)
            modules = tmp / "modules.txt"
        rows = []
        for run in range(1, args.runs + 1):
            figures = _one_run(
                sts_port, api, oidc, tmp, args.settle, modules if run == 1 else None, not args.no_proxy
            )
            rows.append(figures)
            print(
                f"run {run}: VmRSS {figures['VmRSS']:5.1f} MiB  "
                f"(anon {figures['RssAnon']:5.1f}, file {figures['RssFile']:5.1f})"
            )
    rss = statistics.median(r["VmRSS"] for r in rows)
    anon = statistics.median(r["RssAnon"] for r in rows)
    file_backed = statistics.median(r["RssFile"] for r in rows)
    print(
        f"median of {len(rows)}: idle RSS with the proxy {'off' if args.no_proxy else 'on'} {rss:.1f} MiB "
        f"(anon {anon:.1f}, file {file_backed:.1f}; target < {TARGET_MIB:g} with a margin)"
    )


if __name__ == "__main__":
    main()
