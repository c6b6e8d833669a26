"""The local API's one hot request answered before aiohttp parses it.

Every ``docker pull``, ``git fetch`` and ``tokenrelay token`` asks the socket for the current token
once, on a fresh connection, after the sidecar has sat idle, and waits for the answer: through
aiohttp's request machinery, a cold answer took 0.9 to 1.1 ms on the machine of the README's
figures, and 0.75 to 0.85 ms through this shortcut (a bare asyncio protocol: 0.55 to 0.7 ms), out
of a credential helper's 11 to 13 ms. ``QuickToken`` takes a connection's first bytes; when they are one
whole ``GET /v1/token[?audience=…]`` that asks to close the connection, with no body and nothing
after it, and a token is held right now, it writes the answer that ``localapi`` composes and closes.
Anything else (a partial head, keep-alive, another path, a token still to wait for, a refusal) is
handed to aiohttp's protocol untouched, which answers it as it always did: this is a shortcut for
one shape of request, never a second HTTP server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import cast
from urllib.parse import unquote_to_bytes

# ``answer(audience or None, accept)``: the body and headers of a 200 for a token held right now, else None.
Answer = Callable[[str | None, str], tuple[bytes, Mapping[str, str]] | None]

_PATH = b"/v1/token"
# What the helpers' percent-encoding leaves in a query value; anything else is aiohttp's to decode.
_QUERY_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%")


class QuickToken(asyncio.Protocol):
    """One connection's first bytes: answered here when they are the hot request, else aiohttp's."""

    def __init__(self, http: Callable[[], asyncio.BaseProtocol], answer: Answer) -> None:
        self._http = http
        self._answer = answer
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        assert transport is not None
        reply = _quick_reply(data, self._answer)
        if reply is not None:
            transport.write(reply)
            transport.close()
            return
        http = self._http()
        transport.set_protocol(http)
        http.connection_made(transport)
        cast(asyncio.Protocol, http).data_received(data)

    def eof_received(self) -> bool | None:
        # Closed before a byte was sent: nothing to answer, and aiohttp never saw the connection.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None


def _quick_reply(data: bytes, answer: Answer) -> bytes | None:
    """The whole reply when ``data`` is exactly one hot request that can be answered now, else None."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep or rest:
        return None
    lines = head.split(b"\r\n")
    method, _, line = lines[0].partition(b" ")
    target, _, version = line.partition(b" ")
    path, question, query = target.partition(b"?")
    if method != b"GET" or path != _PATH or version != b"HTTP/1.1":
        return None
    audience: str | None = None
    if question:
        name, _, value = query.partition(b"=")
        if name != b"audience" or not value or not set(value) <= _QUERY_CHARS:
            return None
        try:
            audience = unquote_to_bytes(value).decode()
        except UnicodeDecodeError:
            return None
    accept = ""
    close = False
    hosts = 0
    for raw in lines[1:]:
        name, colon, value = raw.partition(b":")
        if not colon or not name or name != name.strip():  # obs-fold, "Name :": llhttp's to refuse
            return None
        key = name.lower()
        if key in (b"content-length", b"transfer-encoding", b"upgrade", b"expect"):
            return None
        if key == b"host":
            hosts += 1
        elif key == b"connection":
            close = value.strip().lower() == b"close"
        elif key == b"accept" and not accept:
            accept = value.strip().decode("latin-1")
    if not close or hosts != 1:  # HTTP/1.1 wants one Host; aiohttp refuses the rest with a 400
        return None
    found = answer(audience, accept)
    if found is None:
        return None
    body, headers = found
    fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (
        f"HTTP/1.1 200 OK\r\n{fields}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
    )
