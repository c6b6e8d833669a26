"""Hostile bytes on the local API's socket of a real ``tokenrelay run``: a 4xx or a closed connection each
time, the process keeps serving, its memory stays put."""

from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tokenrelay.lite import socketclient as client
from tokenrelay.testing import make_jwt

from ..support.security import (
    OVERSIZED,
    OVERSIZED_IDS,
    TokenService,
    hostile_payloads,
    hostile_requests,
    rss,
    send,
)

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RSS_GROWTH_LIMIT = 32 * 1024 * 1024


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


@FUZZ
@given(payload=hostile_payloads(hostile_requests()))
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


@pytest.mark.parametrize("payload", OVERSIZED, ids=OVERSIZED_IDS)
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
