"""Hostile bytes on the local API's socket of a real ``tokenrelay run``: a 4xx or a closed connection each
time, the process keeps serving, its memory stays put."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenrelay import client
from tokenrelay.testing import make_jwt

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RSS_GROWTH_LIMIT = 32 * 1024 * 1024


class TokenService(http.server.BaseHTTPRequestHandler):
    """A stdlib token service in a thread: the daemon under test is a separate process."""

    def do_GET(self) -> None:
        now = int(time.time())
        body = json.dumps({"token": make_jwt({"jti": "fuzz", "iat": now, "exp": now + 3600})}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``tokenrelay run`` on a socket, against the stdlib token service; (process, socket path)."""
    service = http.server.ThreadingHTTPServer(("127.0.0.1", 0), TokenService)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    where = tmp_path_factory.mktemp("d")
    oidc = where / "oidc"
    oidc.write_text(make_jwt({"sub": "fuzz", "exp": int(time.time()) + 86400}))
    path = f"/tmp/trfuzz-{os.getpid()}.sock"
    command = [
        str(Path(sys.executable).with_name("tokenrelay")),
        "run",
        f"--auth-url=http://127.0.0.1:{service.server_address[1]}",
        "--api-url=https://api.example",
        "--identity=groups/a/b",
        f"--id-token-file={oidc}",
        f"--socket={path}",
        "--log-level=error",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(client.LocalApiError):
                client.fetch_token(path, timeout=2)
                break
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, "the daemon did not start serving"
            time.sleep(0.05)
        yield process, path
    finally:
        process.terminate()
        process.wait(10)
        service.shutdown()


def send(path: str, payload: bytes) -> int | None:
    """Send ``payload`` and read the answer's status line: its status, or None when closed without one.

    The connection stays open for writing: a client that half-closes gets no answer from aiohttp,
    which would make every case pass vacuously.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(payload)
        data = b""
        sock.settimeout(1)
        try:
            data = read_status_line(sock)
        except TimeoutError:
            # Still waiting for the rest of a request (e.g. after bare CRLFs, which HTTP lets a
            # server skip): stop sending; it must then close, not hang on.
            sock.settimeout(10)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            data = read_status_line(sock)
    if not data:
        return None
    first = data.split(b"\r\n", 1)[0].split(b" ")
    # aiohttp echoes the version it parsed, so a mangled request line can get "HTTP/0.9 404":
    # still a status line and a 4xx, which is what a client needs.
    assert first[0].startswith(b"HTTP/"), first
    return int(first[1])


def read_status_line(sock: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while b"\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
    return data


def rss(process: subprocess.Popen[bytes]) -> int:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


methods = st.sampled_from(
    [b"GET", b"POST", b"HEAD", b"DELETE", b"OPTIONS", b"CONNECT", b"G\x00T", b"", b"get"]
)
targets = st.one_of(
    st.sampled_from(
        [
            b"/v1/token",
            b"/v1/token?audience=https%3A%2F%2Fapi.example",
            b"/v1/token?audience=%ff%fe",
            b"http://evil.example/v1/token",
            b"//evil.example/v1/token",
            b"/../../etc/passwd",
            b"/v1/%2e%2e/%2e%2e/healthz",
            b"/v1%2ftoken",
            b"*",
            b"/readyz",
            b"/" + b"a" * 70000,
        ]
    ),
    st.binary(max_size=60),
)
versions = st.sampled_from(
    [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/9.9", b"", b"HTTP/1.1 extra", b"\xff"]
)
header_names = st.one_of(
    st.sampled_from([b"Host", b"Accept", b"Content-Length", b"Transfer-Encoding"]), st.binary(max_size=20)
)
header_values = st.one_of(
    st.sampled_from(
        [b"text/plain", b"-1", b"99999999999999999999", b"chunked", b"a\r\nInjected: 1", b"a\rb", b"\xc3\x28"]
    ),
    st.binary(max_size=40),
)
requests = st.builds(
    lambda method, target, version, headers, many, body: (
        method
        + b" "
        + target
        + b" "
        + version
        + b"\r\n"
        + b"".join(n + b": " + v + b"\r\n" for n, v in headers)
        + b"X-Many: 1\r\n" * many
        + b"\r\n"
        + body
    ),
    methods,
    targets,
    versions,
    st.lists(st.tuples(header_names, header_values), max_size=6),
    st.sampled_from([0, 0, 0, 150, 5000]),
    st.binary(max_size=30),
)


@FUZZ
@given(payload=st.one_of(requests, st.binary(max_size=300).map(lambda raw: raw + b"\r\n\r\n")))
def test_hostile_bytes_get_a_4xx_or_a_close(
    daemon: tuple[subprocess.Popen[bytes], str], payload: bytes
) -> None:
    """Broken request lines, odd or many headers, CR/LF in values, invalid UTF-8, absolute URIs: never a
    5xx, never a crash."""
    process, path = daemon
    status = send(path, payload)
    assert status is None or status < 500, status
    assert process.poll() is None


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"GET /v1/token HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"POST /v1/token HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405),
        (b"GET /v1/token?audience=%ff HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        (b"GET /v1/token HTTP/1.1\r\nX: a\rb\r\n\r\n", 400),
        (b"\xff\xfe\r\n\r\n", 400),
    ],
    ids=["token", "post", "bad-audience", "bare-cr", "binary"],
)
def test_each_request_gets_its_answer(
    daemon: tuple[subprocess.Popen[bytes], str], payload: bytes, expected: int
) -> None:
    """Well-formed requests get their answer and broken ones a 400: the fuzzing means something."""
    assert send(daemon[1], payload) == expected


@pytest.mark.parametrize(
    "payload",
    [
        b"GET /v1/token HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n",
        b"GET /v1/token HTTP/1.1\r\nHost: x\r\n" + b"X-Many: 1\r\n" * 20000 + b"\r\n",
        b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\n\r\n",
    ],
    ids=["1MiB-header", "20000-headers", "1MiB-target"],
)
def test_oversized_requests_are_refused(daemon: tuple[subprocess.Popen[bytes], str], payload: bytes) -> None:
    """A huge header, a flood of headers or a huge target: a 4xx (or a close) rather than buffering it."""
    _, path = daemon
    status = send(path, payload)
    assert status is None or 400 <= status < 500, status


def test_still_serving_with_bounded_memory_after_the_fuzz(
    daemon: tuple[subprocess.Popen[bytes], str],
) -> None:
    """After the fuzzing above and 300 more oversized requests, the daemon still hands out tokens and its
    resident memory has grown by less than 32 MiB."""
    process, path = daemon
    before = rss(process)
    for _ in range(100):
        send(path, b"GET /v1/token HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
        send(path, b"GET /v1/token HTTP/1.1\r\nHost: x\r\n" + b"X-Many: 1\r\n" * 20000 + b"\r\n")
        send(path, b"\xff" * 4096)
    assert client.fetch_token(path).audience == "https://api.example"
    assert rss(process) - before < RSS_GROWTH_LIMIT
