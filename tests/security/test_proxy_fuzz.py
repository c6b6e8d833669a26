"""Hostile bytes on the proxy port of a real ``tokenrelay run --proxy-listen``: the proxy's own 4xx, the
upstream's answer to a request that was fine, or a closed connection, each time; the process keeps
serving, its memory stays put, nothing reaches another host, and no token shows in its debug log."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tokenrelay.testing import jti, make_jwt

from ..support.security import (
    OVERSIZED,
    OVERSIZED_IDS,
    TokenService,
    WireServer,
    hostile_payloads,
    hostile_requests,
    methods,
    rss,
    send_head,
    status_of,
    targets,
)

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RSS_GROWTH_LIMIT = 32 * 1024 * 1024
T = TypeVar("T")


class Background:
    """An event loop in a thread, for the loopback servers that these blocking tests talk through."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class IssuingService(TokenService):
    """The stdlib token service, remembering what it issued for the log check."""

    issued: list[str] = []

    def do_GET(self) -> None:
        now = int(time.time())
        token = make_jwt({"jti": f"fuzz{len(self.issued)}", "iat": now, "exp": now + 3600})
        self.issued.append(token)
        self._answer(token)


@dataclass
class Sidecar:
    process: subprocess.Popen[bytes]
    address: tuple[str, int]  # the proxy
    upstream: WireServer
    victim: WireServer

    def fill(self, payload: bytes) -> bytes:
        return payload.replace(b"{up}", self.upstream.authority.encode()).replace(
            b"{victim}", self.victim.authority.encode()
        )

    def assert_only_the_upstream_was_reached(self) -> None:
        assert self.victim.connections == 0, self.victim.received[:200]
        for seen in list(self.upstream.requests):
            assert seen.target.startswith(b"/base"), seen.target[:100]
            assert seen.header(b"host") == [self.upstream.authority.encode()]
            (bearer,) = seen.header(b"authorization")
            assert jti(bearer.removeprefix(b"Bearer ").decode()).startswith("fuzz")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    """``tokenrelay run --proxy-listen`` at debug level, in front of a recording upstream."""
    background = Background()
    upstream = background.run(WireServer("upstream").start())
    victim = background.run(WireServer("victim").start())
    service = http.server.ThreadingHTTPServer(("127.0.0.1", 0), IssuingService)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    where = tmp_path_factory.mktemp("p")
    oidc = make_jwt({"sub": "fuzz", "exp": int(time.time()) + 86400})
    (where / "oidc").write_text(oidc)
    port = free_port()
    log = (where / "stderr").open("wb")
    command = [
        str(Path(sys.executable).with_name("tokenrelay")),
        "run",
        f"--auth-url=http://127.0.0.1:{service.server_address[1]}",
        f"--api-url=http://{upstream.authority}/base",
        "--identity=groups/a/b",
        f"--id-token-file={where / 'oidc'}",
        f"--socket=/tmp/trpfuzz-{os.getpid()}.sock",
        f"--proxy-listen=127.0.0.1:{port}",
        "--log-level=debug",
    ]
    process = subprocess.Popen(command, stderr=log)
    sidecar = Sidecar(process, ("127.0.0.1", port), upstream, victim)
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError):
                if status_of(send_head(sidecar.address, b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")) == 200:
                    break
            assert process.poll() is None, (where / "stderr").read_text()[-2000:]
            assert time.monotonic() < deadline, "the proxy did not start serving"
            time.sleep(0.05)
        yield sidecar
    finally:
        process.terminate()
        process.wait(10)
        log.close()
        service.shutdown()
        background.close()
    text = (where / "stderr").read_bytes()
    assert b"token refreshed" in text  # the log check had something to look at
    for secret in [oidc, *IssuingService.issued]:
        assert secret.encode() not in text, "a token appears in the sidecar's log"
        assert secret.split(".")[1].encode() not in text, "a token's payload appears in the sidecar's log"


odd_targets = st.sampled_from(
    [
        b"/v1/token",
        b"/v1/things?x=1&y=%20z",
        b"/%ff%fe",
        b"/../../etc/passwd",
        b"/v1/%2e%2e/%2e%2e/x",
        b"/v1%2fthings",
        b"http://evil.example/x",
        b"http://{victim}/x",
        b"http://{up}/x/../../y",
        b"http://{up}@{victim}/x",
        b"//{victim}/x",
        b"/x/%2e%2e/%2f%2f{victim}",
        b"\\\\{victim}\\x",
        b"{victim}",
        b"*",
    ]
)
proxy_methods = st.one_of(methods, st.sampled_from([b"PUT", b"PATCH", b"TRACE", b"PRI"]))
# Requests that mostly parse, so that the header handling and the forwarding get fuzzed too, not only
# the parser's refusals: framing, hop-by-hop and token headers with odd but legal values, bodies that
# do or do not match the framing, a pipelined second request.
plausible_requests = st.builds(
    lambda method, target, headers, body: (
        method
        + b" "
        + target
        + b" HTTP/1.1\r\n"
        + b"".join(n + b": " + v + b"\r\n" for n, v in headers)
        + b"\r\n"
        + body
    ),
    st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PATCH"]),
    st.one_of(
        odd_targets, st.text(alphabet="/.%2eEfF?#&=@:;\\abc{}", max_size=30).map(lambda t: ("/" + t).encode())
    ),
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    b"Host",
                    b"Content-Length",
                    b"Transfer-Encoding",
                    b"Connection",
                    b"Upgrade",
                    b"Expect",
                    b"Authorization",
                    b"Proxy-Authorization",
                    b"Forwarded",
                    b"TE",
                    b"Trailer",
                    b"Keep-Alive",
                    b"X-Forwarded-Host",
                    b"X-A",
                ]
            ),
            st.one_of(
                st.sampled_from(
                    [
                        b"0",
                        b"5",
                        b"-1",
                        b"99999999999999999999",
                        b"close",
                        b"keep-alive",
                        b"Host, X-A",
                        b"Content-Length",
                        b"Authorization",
                        b"Transfer-Encoding",
                        b"websocket",
                        b"upgrade",
                        b"100-continue",
                        b"chunked",
                        b"gzip, chunked",
                        b"chunked, gzip",
                        b"Bearer client",
                        b"{victim}",
                        b"http://{victim}/",
                        b"\xc3\x28",
                        b"",
                    ]
                ),
                st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20).map(str.encode),
            ),
        ),
        max_size=5,
    ),
    st.sampled_from([b"", b"hello", b"5\r\nhello\r\n0\r\n\r\n", b"\r\n", b"GET / HTTP/1.1\r\n\r\n"]),
)


@FUZZ
@given(
    payload=st.one_of(
        hostile_payloads(hostile_requests(st.one_of(targets, odd_targets), proxy_methods)), plausible_requests
    )
)
def test_hostile_bytes_get_a_4xx_the_upstreams_answer_or_a_close(sidecar: Sidecar, payload: bytes) -> None:
    """Broken request lines, odd or many headers, CR/LF in values, invalid UTF-8, absolute URIs, random
    binary: never a 5xx of the proxy's own, never a crash, nothing sent anywhere but the upstream."""
    head = send_head(sidecar.address, sidecar.fill(payload))
    status = status_of(head)
    upstream = b"\r\nX-Served-By: upstream" in head
    event(f"{status} from the {'upstream' if upstream else 'proxy'}")  # --hypothesis-show-statistics
    if status is not None and not upstream:
        assert 400 <= status < 500 or status == 100, head  # 100: the proxy's own answer to Expect
    assert sidecar.process.poll() is None
    sidecar.assert_only_the_upstream_was_reached()


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"GET /v1/things HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", 200),
        (b"CONNECT {victim} HTTP/1.1\r\nHost: {victim}\r\n\r\n", 405),
        (b"GET http://{victim}/x HTTP/1.1\r\nHost: {victim}\r\n\r\n", 400),
        (b"GET /v1/things HTTP/1.1\r\nX: a\rb\r\n\r\n", 400),
        (b"\xff\xfe\r\n\r\n", 400),
    ],
    ids=["get", "post", "connect", "foreign", "bare-cr", "binary"],
)
def test_each_request_gets_its_answer(sidecar: Sidecar, payload: bytes, expected: int) -> None:
    """Well-formed requests reach the upstream and broken ones get the proxy's 4xx: the fuzzing means
    something."""
    assert status_of(send_head(sidecar.address, sidecar.fill(payload))) == expected


@pytest.mark.parametrize("payload", OVERSIZED, ids=OVERSIZED_IDS)
def test_oversized_requests_are_refused(sidecar: Sidecar, payload: bytes) -> None:
    """A huge header, a flood of headers or a huge target: 431 (or a close) rather than buffering it."""
    status = status_of(send_head(sidecar.address, payload))
    assert status in (None, 431), status


def test_still_serving_with_bounded_memory_after_the_fuzz(sidecar: Sidecar) -> None:
    """After the fuzzing above and 300 more hostile requests, the proxy still forwards requests with the
    token and its resident memory has grown by less than 32 MiB."""
    before = rss(sidecar.process)
    for _ in range(100):
        for payload in OVERSIZED[:2]:
            send_head(sidecar.address, payload)
        send_head(sidecar.address, b"\xff" * 4096)
    head = send_head(sidecar.address, b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_of(head) == 200
    assert b"\r\nX-Served-By: upstream" in head
    assert sidecar.upstream.requests[-1].target == b"/base/after"
    sidecar.assert_only_the_upstream_was_reached()
    assert rss(sidecar.process) - before < RSS_GROWTH_LIMIT
