"""HTTP/2 floods against `tokenrelay run --proxy-listen ...`: what each costs the proxy, and whether it ends.

    python bench/h2_floods.py [--seconds 3] [--only NAME]

nginx serves as the h2c upstream (it answers once it has a request's whole body),
tokenrelay.testing's FakeTokenService as the token service. For each flood a fresh
`tokenrelay run --proxy-timeout 5` is started, one request goes through it (token held, HTTP/2 code
loaded), then raw sockets drive the flood for --seconds (reconnecting when the proxy closes, so a
defence must hold across connections too). One line per flood: the proxy's RSS before, at the end of
the flood and a second after its connections closed, the CPU seconds it used, the frames sent, and
what the proxy did (the first GOAWAY's code, connections it closed).

- CONTINUATION: HEADERS without END_HEADERS, then empty CONTINUATION frames without end;
- empty DATA / RST_STREAM on a reset stream: a POST opened and reset by the client, then those frames;
- WINDOW_UPDATE: increments of 1 on the connection, asked for by nothing;
- rapid reset: HEADERS+RST_STREAM pairs (CVE-2023-44487);
- stalled bodies: 100 POSTs that send one byte of their body and stop; the line says how many the
  proxy ended (an answer or RST_STREAM) within --seconds (at least 25: past the 20 s body_timeout).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hpack import Encoder

from grpc_bench import cpu_seconds, rss_mib
from proxy_bench import free_port, run_nginx, wait_port

BIN = Path(sys.executable).parent
FAKE_STS = """
import sys
from aiohttp import web
from tokenrelay.testing import FakeTokenService
web.run_app(FakeTokenService().app(), host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""
# the h2c upstream: nginx takes a request's whole body before it answers (proxy_request_buffering, the
# default), as a gRPC server reads a unary call's message whole, so a stalled body holds its stream
NGINX_SERVERS = """
    server {{
        listen 127.0.0.1:{upstream} http2;
        client_body_timeout 60s;
        location / {{ proxy_pass http://127.0.0.1:{backend}; }}
    }}
    server {{
        listen 127.0.0.1:{backend};
        location / {{ return 200 "ok"; }}
    }}
"""
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS = 0x1, 0x4
REQUEST = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":authority", b"bench"),
    (b":path", b"/bench.Echo/Unary"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
]
CODES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 5: "STREAM_CLOSED", 11: "ENHANCE_YOUR_CALM"}


def frame(kind: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return struct.pack(">LBL", len(payload) << 8 | kind, flags, sid) + payload


def block() -> bytes:
    """The request's header block, coded without the dynamic table: the same bytes serve any stream."""
    encoder = Encoder()
    encoder.header_table_size = 0
    return bytes(encoder.encode(REQUEST))


HEAD = block()
START = PREFACE + frame(SETTINGS, 0, 0) + frame(SETTINGS, 1, 0)
CHUNK = 64 * 1024


@dataclass
class Seen:
    """What the proxy sent back on one connection."""

    buffer: bytearray = field(default_factory=bytearray)
    goaway: int | None = None
    ended: set[int] = field(default_factory=set)  # streams answered in full or reset

    def read(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 9:
            word, flags, sid = struct.unpack_from(">LBL", self.buffer)
            length, kind = word >> 8, word & 0xFF
            if len(self.buffer) < 9 + length:
                break
            payload = bytes(self.buffer[9 : 9 + length])
            del self.buffer[: 9 + length]
            if kind == GOAWAY and self.goaway is None:
                self.goaway = struct.unpack_from(">L", payload, 4)[0]
            elif kind == RST_STREAM or (kind in (DATA, HEADERS) and flags & END_STREAM):
                self.ended.add(sid)


class Flood:
    """Bytes to open a connection with, then bytes to send again and again (empty: just hold it)."""

    def __init__(self, opening: bytes, again: Callable[[int], bytes]) -> None:
        self.opening = opening
        self.again = again  # given how many chunks were sent on this connection


def continuation() -> Flood:
    chunk = frame(CONTINUATION, 0, 1) * (CHUNK // 9)
    return Flood(START + frame(HEADERS, 0, 1, HEAD), lambda n: chunk)


def on_reset_stream(kind: int) -> Flood:
    chunk = frame(kind, 0, 1, bytes(4) if kind == RST_STREAM else b"") * (CHUNK // (13 if kind else 9))
    opening = START + frame(HEADERS, END_HEADERS, 1, HEAD) + frame(RST_STREAM, 0, 1, struct.pack(">L", 8))
    return Flood(opening, lambda n: chunk)


def window_updates() -> Flood:
    chunk = frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 1)) * (CHUNK // 13)
    return Flood(START, lambda n: chunk)


def rapid_reset() -> Flood:
    cancel = struct.pack(">L", 8)

    def pairs(n: int) -> bytes:
        first = 1 + 2 * 1000 * n
        return b"".join(
            frame(HEADERS, END_HEADERS | END_STREAM, sid, HEAD) + frame(RST_STREAM, 0, sid, cancel)
            for sid in range(first, first + 2000, 2)
        )

    return Flood(START, pairs)


def stalled_bodies() -> Flood:
    opening = START + b"".join(
        frame(HEADERS, END_HEADERS, sid, HEAD) + frame(DATA, 0, sid, b"\x00") for sid in range(1, 201, 2)
    )
    return Flood(opening, lambda n: b"")


FLOODS: dict[str, Callable[[], Flood]] = {
    "CONTINUATION": continuation,
    "empty DATA on a reset stream": lambda: on_reset_stream(DATA),
    "RST_STREAM on a reset stream": lambda: on_reset_stream(RST_STREAM),
    "WINDOW_UPDATE": window_updates,
    "rapid reset": rapid_reset,
    "stalled bodies": stalled_bodies,
}


@dataclass
class Outcome:
    sent: int = 0  # bytes of frames
    connections: int = 0
    closed: int = 0  # connections the proxy closed
    goaway: int | None = None  # the first GOAWAY's code
    ended: int = 0  # streams the proxy ended (stalled bodies)


def drive(port: int, flood: Flood, seconds: float, reconnect: bool) -> Outcome:
    """The flood on one connection at a time for ``seconds``, reading all the proxy sends back."""
    outcome = Outcome()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        conn = socket.create_connection(("127.0.0.1", port))
        conn.setblocking(False)
        outcome.connections += 1
        seen = Seen()
        pending, chunks = flood.opening, 0
        selector = selectors.DefaultSelector()
        selector.register(conn, selectors.EVENT_READ | selectors.EVENT_WRITE)
        closed = False
        while not closed and time.monotonic() < until:
            for _key, events in selector.select(0.2):
                if events & selectors.EVENT_READ:
                    try:
                        data = conn.recv(1 << 20)
                    except ConnectionError:
                        data = b""
                    if not data:
                        closed = True
                        break
                    seen.read(data)
                if events & selectors.EVENT_WRITE:
                    if not pending:
                        pending = flood.again(chunks)
                        chunks += 1
                        if not pending:
                            selector.modify(conn, selectors.EVENT_READ)
                            continue
                    try:
                        sent = conn.send(pending)
                    except (BrokenPipeError, ConnectionResetError):
                        closed = True
                        break
                    outcome.sent += sent
                    pending = pending[sent:]
        selector.close()
        conn.close()
        outcome.closed += closed
        outcome.ended += len(seen.ended)
        if outcome.goaway is None:
            outcome.goaway = seen.goaway
        if not closed or not reconnect:
            break
    return outcome


@contextlib.contextmanager
def proxy(sts: int, upstream: int, tmp: Path) -> Iterator[tuple[int, int]]:
    """A fresh `tokenrelay run` with its proxy; yields (pid, proxy port)."""
    sock, port = tmp / "relay.sock", free_port()
    oidc = tmp / "oidc"
    oidc.write_text("eyJhbGciOiJub25lIn0.eyJzdWIiOiJiZW5jaCJ9.sig")
    relay = subprocess.Popen(
        [
            str(BIN / "tokenrelay"),
            "run",
            "--auth-url",
            f"http://127.0.0.1:{sts}",
            "--api-url",
            f"http://127.0.0.1:{upstream}",
            "--identity",
            "org/bench",
            "--id-token-file",
            str(oidc),
            "--socket",
            str(sock),
            "--proxy-listen",
            f"127.0.0.1:{port}",
            "--proxy-timeout",
            "5",
            "--log-level",
            "error",
        ]
    )
    try:
        wait_port(port)
        warm(port)
        yield relay.pid, port
    finally:
        relay.terminate()
        relay.wait(10)
        sock.unlink(missing_ok=True)


def warm(port: int) -> None:
    """One whole gRPC call through the proxy: a token held, the HTTP/2 code loaded."""
    with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
        conn.sendall(START + frame(HEADERS, END_HEADERS, 1, HEAD) + frame(DATA, END_STREAM, 1, bytes(5)))
        seen = Seen()
        for _ in range(20):
            if 1 in seen.ended:
                return
            try:
                data = conn.recv(65536)
            except TimeoutError:  # older proxies held an answer's last frame until the next read
                conn.sendall(frame(PING, 0, 0, bytes(8)))
                continue
            if not data:
                raise RuntimeError("the proxy closed the warm-up call")
            seen.read(data)
        raise RuntimeError("the warm-up call got no whole answer")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each flood is driven")
    parser.add_argument("--only", choices=list(FLOODS), help="one flood only")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="tokenrelay-h2-floods-") as tmp_name,
        contextlib.ExitStack() as stack,
    ):
        tmp = Path(tmp_name)
        sts = free_port()
        sts_proc = subprocess.Popen([sys.executable, "-c", FAKE_STS, str(sts)])
        stack.callback(sts_proc.kill)
        wait_port(sts)
        upstream, backend = free_port(), free_port()
        servers = NGINX_SERVERS.format(upstream=upstream, backend=backend)
        stack.enter_context(run_nginx(tmp, servers, (upstream, backend)))
        for name, make in FLOODS.items():
            if args.only and name != args.only:
                continue
            stalled = name == "stalled bodies"
            seconds = max(args.seconds, 25.0) if stalled else args.seconds  # past body_timeout (20 s)
            with proxy(sts, upstream, tmp) as (pid, port):
                before, cpu = rss_mib(pid), cpu_seconds(pid)
                outcome = drive(port, make(), seconds, reconnect=not stalled)
                during, used = rss_mib(pid), cpu_seconds(pid) - cpu
                time.sleep(1.0)
                after = rss_mib(pid)
            goaway = (
                "no GOAWAY"
                if outcome.goaway is None
                else f"GOAWAY {CODES.get(outcome.goaway, outcome.goaway)}"
            )
            what = (
                f"{outcome.ended}/100 streams ended by the proxy"
                if stalled
                else f"{outcome.sent / 1e6:6.1f} MB written, "
                f"{outcome.closed}/{outcome.connections} connections closed by the proxy"
            )
            print(
                f"{name:28} {seconds:4.1f} s: RSS {before:5.1f} -> {during:6.1f} MiB, "
                f"{after:6.1f} after close; "
                f"CPU {used:5.2f} s; {what}; {goaway}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
