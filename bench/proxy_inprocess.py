"""The HTTP/1.1 path's own Python time per proxied request, without sockets or a second process.

    python bench/proxy_inprocess.py [--requests 20000] [--rounds 7]

A client connection and a pooled upstream connection run on stand-in transports that only count
writes: each request is one read from the client (``GET`` with a ``Host``) and one read from the
upstream (nginx's answer head and a 52-byte JSON body). The script prints the best round's process
CPU time per request: the part of the relay's CPU that is ours to cut, apart from the kernel's and
the event loop's (docs/proxy.md, Speed). Compare two versions of the code by running it with
``PYTHONPATH`` naming the other's ``src`` (``git archive COMMIT src | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from tokenrelay.proxy import ProxyServer
from tokenrelay.proxy.http1 import upstream as upstream_module
from tokenrelay.proxy.http1.downstream import ClientConnection
from tokenrelay.proxy.http1.upstream import UpstreamConnection
from tokenrelay.testing import StaticTokenSource

REQUEST = b"GET /v1/page HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
ANSWER = (
    b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sat, 28 Nov 2026 18:40:00 GMT\r\n"
    b"Content-Type: application/json\r\nContent-Length: 52\r\nConnection: keep-alive\r\n\r\n"
    b'{"uid":"groups/acme","name":"acme","verified":false}'
)


class CountingTransport:
    """Stands in for a socket's transport: takes every write at once."""

    def __init__(self) -> None:
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...

    def can_write_eof(self) -> bool:
        return True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


async def measure(requests: int, rounds: int) -> float:
    """The best round's CPU microseconds per request."""
    url = "http://127.0.0.1:1"
    proxy = ProxyServer(url, StaticTokenSource(url, "static-benchmark-token"), listen=("127.0.0.1", 0))
    client = ClientConnection(proxy.context)
    to_client = CountingTransport()
    client.connection_made(to_client)  # type: ignore[arg-type]
    conn = UpstreamConnection(proxy.pool)
    to_upstream = CountingTransport()
    conn.connection_made(to_upstream)  # type: ignore[arg-type]
    proxy.pool.release(conn, True)
    upstream_module._READ_VIEW[: len(ANSWER)] = ANSWER  # what the event loop would have read into it
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(requests):
            client.data_received(REQUEST)
            conn.buffer_updated(len(ANSWER))
        best = min(best, (time.process_time() - start) / requests * 1e6)
    assert to_client.writes == to_upstream.writes == requests * rounds, "a request was not relayed"
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    best = asyncio.run(measure(args.requests, args.rounds))
    print(f"HTTP/1.1 path, in process: {best:.2f} us of CPU per request (best of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
