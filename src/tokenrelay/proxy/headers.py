"""Which header lines cross the proxy, in each direction (RFC 9110 §7.6.1).

Hop-by-hop headers describe one connection, not the message: ``Connection`` and every header it
names, ``Keep-Alive``, ``TE``, ``Trailer``, ``Transfer-Encoding``, ``Upgrade`` and any ``Proxy-*``.
They are dropped both ways; the proxy writes its own framing (``Content-Length`` passes through,
chunked bodies are re-chunked). Towards the upstream it also drops ``Host`` (set to the upstream's),
``Authorization`` (replaced by the current token) and ``Expect`` (the proxy answers ``100 Continue``
itself). Header lines are kept as the bytes the peer sent: the proxy never re-encodes a value.

HTTP/2 names the same fields connection-specific (RFC 9113 §8.2.2) and h2 refuses them from a
client, except ``TE: trailers`` (gRPC's), which crosses; ``H2_REQUEST_DROP`` (which
``http2.downstream`` applies to a request's fields) and ``h2_answer`` apply the same sets to HTTP/2
field lists. There the proxy does not answer ``100 Continue`` itself: ``Expect`` crosses.

A request's trailers (HTTP/2) cross under the same rules, and lose as well what RFC 9110 §6.5.1 keeps
out of trailers: fields that frame, route, authenticate or control the request. The proxy and the
upstream acted on the head already; arriving late, they could only say something the head did not
(a second ``Authorization`` or ``Host``, a ``Cookie``, an ``X-Forwarded-Host``).
"""

from __future__ import annotations

from typing import NamedTuple

HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"te", b"trailer", b"transfer-encoding", b"upgrade"})
_REPLACED = frozenset({b"host", b"authorization"})  # the upstream's Host, the current token
_REQUEST_DROP = HOP_BY_HOP | _REPLACED | {b"expect"}
H2_REQUEST_DROP = HOP_BY_HOP | _REPLACED
# RFC 9110 §6.5.1 (and the de facto forwarding fields): never in a request's trailers
H2_TRAILER_DROP = H2_REQUEST_DROP | {
    b"cookie",
    b"content-length",
    b"content-type",
    b"content-encoding",
    b"content-range",
    b"expect",
    b"max-forwards",
    b"cache-control",
    b"range",
    b"if-match",
    b"if-none-match",
    b"if-modified-since",
    b"if-unmodified-since",
    b"if-range",
    b"forwarded",
    b"x-forwarded-for",
    b"x-forwarded-host",
    b"x-forwarded-proto",
    b"via",
}
# Connection options that name no header: nothing more to drop for them.
# Content-Length frames the body: a client must not make the proxy drop it (request smuggling).
_PLAIN_OPTIONS = frozenset({b"keep-alive", b"close", b"upgrade", b"content-length"})


class Head(NamedTuple):
    """The kept header lines of one message and what the dropped ones said about its framing."""

    lines: bytes  # "Name: value\r\n" for every kept header
    chunked: bool  # Transfer-Encoding ends in chunked
    length: int  # Content-Length, or -1 when absent
    upgrade: bytes  # the Upgrade header's value, or b""
    expect_continue: bool


def _options(value: bytes) -> set[bytes]:
    return {option.strip().lower() for option in value.split(b",")} - {b""}


def _filter(headers: list[tuple[bytes, bytes]], drop: frozenset[bytes]) -> Head:
    parts: list[bytes] = []
    names: list[bytes] = []
    named: set[bytes] | None = None
    chunked = False
    length = -1
    upgrade = b""
    expect = False
    for name, value in headers:
        lname = name.lower()
        if lname in drop or lname.startswith(b"proxy-"):
            if lname == b"connection":
                options = _options(value) - _PLAIN_OPTIONS
                if options:
                    named = options if named is None else named | options
            elif lname == b"transfer-encoding":
                # the parser has already refused a Transfer-Encoding that does not end in chunked
                chunked = value.rstrip().lower().endswith(b"chunked")
            elif lname == b"upgrade":
                upgrade = value
            elif lname == b"expect":
                expect = value.strip().lower() == b"100-continue"
            continue
        if lname == b"content-length":
            length = int(value)  # the parser has validated it
        parts += (name, b": ", value, b"\r\n")
        names.append(lname)
    if named:
        parts = [
            part for i, lname in enumerate(names) if lname not in named for part in parts[4 * i : 4 * i + 4]
        ]
    return Head(b"".join(parts), chunked, length, upgrade, expect)


class LastHead:
    """The last header list one connection filtered, and its result: a client sends the same head
    on every request of a connection, and an upstream the same answer head (its Date changes once a
    second), so a repeat costs one comparison of the lists instead of a filter (a fifth of the
    HTTP/1.1 path's Python time). One per connection and direction: one client's fields (its
    Authorization) never meet another's, and they go with the connection."""

    __slots__ = ("_drop", "_fields", "_head")

    def __init__(self, drop: frozenset[bytes]) -> None:
        self._drop = drop
        self._fields: list[tuple[bytes, bytes]] | None = None
        self._head = Head(b"", False, -1, b"", False)

    def filter(self, fields: list[tuple[bytes, bytes]]) -> Head:
        """``fields`` filtered (precondition: the caller does not change the list afterwards)."""
        if fields == self._fields:
            return self._head
        head = self._head = _filter(fields, self._drop)
        self._fields = fields
        return head


def last_request() -> LastHead:
    """A memo of ``request``: one per client connection."""
    return LastHead(_REQUEST_DROP)


def last_response() -> LastHead:
    """A memo of ``response``: one per upstream connection."""
    return LastHead(HOP_BY_HOP)


def request(headers: list[tuple[bytes, bytes]]) -> Head:
    """The client's headers as the upstream may see them (before Host and Authorization are added)."""
    return _filter(headers, _REQUEST_DROP)


def response(headers: list[tuple[bytes, bytes]]) -> Head:
    """The upstream's headers as the client may see them (before the proxy's framing is added)."""
    return _filter(headers, HOP_BY_HOP)


def h2_answer(fields: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """An HTTP/2 answer's fields (lower-case names) as the client may see them."""
    return [(name, value) for name, value in fields if name not in HOP_BY_HOP and name[:6] != b"proxy-"]


def h2_trailers(fields: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """An HTTP/2 request's trailers (lower-case names) as the upstream may see them."""
    return [
        (name, value)
        for name, value in fields
        if name not in H2_TRAILER_DROP and name[:6] != b"proxy-" and name[:1] != b":"
    ]
