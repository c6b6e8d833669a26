"""The proxy reaches no host but its upstream, whatever the client puts in the target or the headers.

Three loopback servers record every connection and request on the wire: the upstream (--api-url
``http://127.0.0.1:P/base``), a victim on the same address at another port, and a second victim at
another loopback address on the upstream's own port. Each attack either gets the proxy's own 4xx, or
reaches the upstream with the target appended byte for byte to ``/base`` and the upstream's ``Host``;
the victims see no connection at all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httptools
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenrelay.proxy import Limits, ProxyServer
from tokenrelay.proxy.bearer import header_line
from tokenrelay.proxy.target import Target

from ..support.security import StaticTokens, WireServer

BASE = b"/base"


@dataclass
class Answer:
    status: int | None  # None: closed without a status line
    served_by: bytes


@dataclass
class Scene:
    proxy: ProxyServer
    tokens: StaticTokens
    upstream: WireServer
    victims: list[WireServer]

    def fill(self, template: bytes) -> bytes:
        """The template with {up}, {victim} and {victim2} replaced by the servers' host:port."""
        return (
            template.replace(b"{up}", self.upstream.authority.encode())
            .replace(b"{victim}", self.victims[0].authority.encode())
            .replace(b"{victim2}", self.victims[-1].authority.encode())
        )

    async def send(self, payload: bytes) -> Answer:
        """``payload`` on a new connection to the proxy; the first answer's status and origin."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.proxy.port)
        answer = _Answer()
        parser = httptools.HttpResponseParser(answer)
        try:
            writer.write(payload)
            with contextlib.suppress(ConnectionResetError):
                async with asyncio.timeout(5):
                    while not answer.done and (data := await reader.read(65536)):
                        parser.feed_data(data)
        finally:
            writer.close()
        return Answer(parser.get_status_code() if answer.began else None, answer.served_by)

    def assert_untouched(self) -> None:
        for victim in self.victims:
            assert victim.connections == 0, f"{victim.name} was reached: {victim.received[:200]!r}"


class _Answer:
    def __init__(self) -> None:
        self.began = False
        self.done = False
        self.served_by = b""

    def on_message_begin(self) -> None:
        self.began = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"x-served-by":
            self.served_by = value

    def on_message_complete(self) -> None:
        self.done = True


@pytest.fixture
async def scene(wire_servers: Callable[..., Awaitable[WireServer]]) -> AsyncIterator[Scene]:
    upstream = await wire_servers("upstream")
    victim = await wire_servers("victim")
    # Same port as the upstream, another loopback address: only a changed host could reach it.
    victim2 = await wire_servers("victim2", "127.0.0.2", upstream.port)
    api_url = f"http://{upstream.authority}/base"
    tokens = StaticTokens(api_url)
    proxy = ProxyServer(api_url, tokens, listen=("127.0.0.1", 0), limits=Limits(upstream_timeout=5.0))
    await proxy.start()
    yield Scene(proxy, tokens, upstream, [victim, victim2])
    await proxy.stop()


def request(target: bytes, *headers: bytes, method: bytes = b"GET") -> bytes:
    return method + b" " + target + b" HTTP/1.1\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


# Targets forwarded as they are: the upstream gets BASE + target, byte for byte.
VERBATIM = [
    b"/../../etc/passwd",
    b"/%2e%2e/%2e%2e/admin",
    b"/.%2e/.%2E/admin",
    b"/a/..%2f..%2fadmin",
    b"/%2f%2f{victim}/x",
    b"//{victim}/x",
    b"//{victim2}/x",
    b"///{victim}/x",
    b"/\\\\{victim}\\x",
    b"/\\{victim}/x",
    b"/@{victim}/x",
    b"/x?next=http://{victim}/&url=//{victim2}",
    b"/x%0d%0aHost:%20{victim}",
    b"/..;/x",
    b"/x#@{victim}/",
]

# Targets the proxy refuses with 400 FOREIGN_TARGET (or 400 for a request line it cannot parse).
REFUSED = [
    b"http://{victim}/x",  # same host, another port
    b"http://{victim2}/x",  # the upstream's port, another host
    b"https://{victim}/x",
    b"http://localhost:{up_port}/x",
    b"ftp://{up}/x",
    b"file:///etc/passwd",
    b"gopher://{victim}/_x",
    b"HTTP://{victim}/x",
    b"http://{up}@{victim}/x",
    b"http://user:pass@{victim}/x",
    b"http://{up}%2f@{victim2}/x",
    b"http://{victim}#@{up}/x",
    b"http://{victim}\\@{up}/x",
    b"http://{up}\\@{victim}/x",
    b"http://[::ffff:127.0.0.1]:{up_port}/x",
    b"http://2130706433:{up_port}/x",
    b"http://0x7f.1:{up_port}/x",
    b"http://127.1:{up_port}/x",
    b"http://127.0.0.1.:{up_port}/x",
    b"{victim}",
    b"{victim}/x",
    b"*",
    b"\\\\{victim}\\x",
    b"x/../../x",
]


@pytest.mark.parametrize("target", VERBATIM)
async def test_odd_paths_reach_the_upstream_verbatim_under_the_api_path(scene: Scene, target: bytes) -> None:
    """``..``, ``%2e%2e``, encoded slashes, ``//host`` and backslashes in a path are passed to the upstream
    byte for byte under the api-url's path, with the upstream's Host and the token; never elsewhere."""
    target = scene.fill(target)
    answer = await scene.send(request(target, b"Host: " + scene.fill(b"{victim}")))
    assert (answer.status, answer.served_by) == (200, b"upstream")
    seen = scene.upstream.requests[-1]
    assert seen.target == BASE + target
    assert seen.header(b"host") == [scene.upstream.authority.encode()]
    assert [b"Authorization: " + v + b"\r\n" for v in seen.header(b"authorization")] == [
        header_line(scene.tokens.token)
    ]
    scene.assert_untouched()


@pytest.mark.parametrize("target", REFUSED)
async def test_targets_naming_anything_else_are_refused(scene: Scene, target: bytes) -> None:
    """Absolute URIs naming another host, port or scheme, userinfo and fragment tricks, authority-form and
    other non-path targets: 400 from the proxy, nothing sent anywhere."""
    target = scene.fill(target).replace(b"{up_port}", str(scene.upstream.port).encode())
    answer = await scene.send(request(target, b"Host: " + scene.upstream.authority.encode()))
    assert answer.status == 400
    assert answer.served_by == b""
    assert scene.upstream.connections == 0
    scene.assert_untouched()


async def test_absolute_uri_naming_the_upstream_is_forwarded_to_it(scene: Scene) -> None:
    """An absolute URI naming the upstream itself (what an HTTP_PROXY client sends) reaches it, its path
    (``..`` and all) under the api-url's path; userinfo and fragment are dropped."""
    cases = {
        b"http://{up}/a/../b?x=1#frag": b"/a/../b?x=1",
        b"http://someone@{up}/x": b"/x",
        b"http://{up}": b"/",
    }
    for template, path in cases.items():
        answer = await scene.send(request(scene.fill(template), b"Host: " + scene.fill(b"{victim}")))
        assert (answer.status, answer.served_by) == (200, b"upstream")
        seen = scene.upstream.requests[-1]
        assert seen.target == BASE + path
        assert seen.header(b"host") == [scene.upstream.authority.encode()]
    scene.assert_untouched()


@pytest.mark.parametrize(
    "headers",
    [
        [b"Host: {victim}"],
        [b"Host: {victim2}"],
        [b"Host: {up}", b"Host: {victim}"],
        [b"Host: evil.example@{victim}"],
        [b"Host: {victim}", b"X-Forwarded-Host: {victim}", b"Forwarded: host={victim}"],
        [b"Host: {victim}", b"X-Original-URL: http://{victim}/", b"X-Rewrite-URL: //{victim}/"],
        [b"Host: {victim}", b"Connection: Host", b"Proxy-Host: {victim}"],
    ],
    ids=["victim", "victim2", "two-hosts", "userinfo", "forwarded", "rewrite-headers", "connection-host"],
)
async def test_host_headers_never_choose_the_destination(scene: Scene, headers: list[bytes]) -> None:
    """Host (one, two, odd), Forwarded and rewrite headers naming another host: the request still goes to
    the upstream, with exactly one Host, the upstream's."""
    answer = await scene.send(request(b"/x", *(scene.fill(h) for h in headers)))
    assert (answer.status, answer.served_by) == (200, b"upstream")
    seen = scene.upstream.requests[-1]
    assert seen.target == BASE + b"/x"
    assert seen.header(b"host") == [scene.upstream.authority.encode()]
    scene.assert_untouched()


@pytest.mark.parametrize(
    "payload",
    [
        b"GET /x HTTP/1.1\r\nX-A: a\rHost: {victim}\r\n\r\n",
        b"GET /x HTTP/1.1\r\nX-A: a\nHost: {victim}\r\n\r\n",
        b"GET /x HTTP/1.1\r\nX-A: a\r\n Host: {victim}\r\n\r\n",
        b"GET /x HTTP/1.1\r\nX-A: a\x00\r\nHost: {victim}\r\n\r\n",
        b"GET /x\rhttp://{victim}/ HTTP/1.1\r\n\r\n",
        b"GET /x http://{victim}/ HTTP/1.1\r\n\r\n",
        b"GET http://{victim}/\r\n/x HTTP/1.1\r\n\r\n",
        b"GET /x HTTP/1.1\nHost: {victim}\n\n",
    ],
    ids=[
        "bare-cr",
        "bare-lf",
        "obs-fold",
        "nul",
        "cr-in-target",
        "space-in-target",
        "crlf-in-target",
        "lf-only",
    ],
)
async def test_cr_lf_injection_is_refused(scene: Scene, payload: bytes) -> None:
    """CR, LF or NUL smuggled into a header value or the request line: 400 (or a close), nothing sent."""
    answer = await scene.send(scene.fill(payload))
    assert answer.status in (400, None)
    assert scene.upstream.requests == []
    scene.assert_untouched()


async def test_http09_style_request_line_goes_to_the_upstream_only(scene: Scene) -> None:
    """``GET /x`` + CRLF + ``Host: victim HTTP/1.1`` (a version smuggled into a header): the parser takes it
    as an old-style request; it is answered from the upstream, never from the victim."""
    answer = await scene.send(scene.fill(b"GET /x\r\nHost: {victim} HTTP/1.1\r\n\r\n"))
    assert answer.served_by in (b"upstream", b"")
    for seen in scene.upstream.requests:
        assert seen.target == BASE + b"/x"
        assert seen.header(b"host") == [scene.upstream.authority.encode()]
    scene.assert_untouched()


# -- fuzzing the same, with the pieces mixed ----------------------------------------------------

schemes = st.sampled_from(
    [b"http://", b"https://", b"HTTP://", b"ftp://", b"//", b"", b"http:/", b"http:\\\\"]
)
userinfos = st.sampled_from([b"", b"{up}@", b"{victim}@", b"u:p@", b"{up}%2f@", b"{up}\\@", b"{up}#@"])
hosts = st.sampled_from([b"{up}", b"{victim}", b"{victim2}", b"127.0.0.1", b"localhost:{up_port}", b"[::1]"])
paths = st.lists(
    st.sampled_from(
        [
            b"/",
            b"..",
            b"%2e%2e",
            b".%2E",
            b"%2f",
            b"%2F",
            b"\\",
            b"@",
            b"#",
            b"?",
            b"x",
            b"{victim}",
            b";",
            b"//",
        ]
    ),
    max_size=8,
).map(b"".join)
host_headers = st.lists(st.sampled_from([b"{up}", b"{victim}", b"{victim2}", b"evil.example"]), max_size=2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scheme=schemes, userinfo=userinfos, host=hosts, path=paths, host_values=host_headers)
async def test_mixed_targets_never_reach_another_host(
    scene: Scene, scheme: bytes, userinfo: bytes, host: bytes, path: bytes, host_values: list[bytes]
) -> None:
    """Schemes, userinfo, hosts, ports, dot segments, encoded and back slashes mixed at random: either the
    proxy's 4xx, or the upstream gets a target under /base with its own Host; the victims see nothing."""
    up_port = str(scene.upstream.port).encode()
    target = scene.fill(scheme + userinfo + host + path).replace(b"{up_port}", up_port)
    before = len(scene.upstream.requests)
    answer = await scene.send(request(target, *(b"Host: " + scene.fill(v) for v in host_values)))
    scene.assert_untouched()
    if answer.served_by != b"upstream":
        assert answer.status is None or 400 <= answer.status < 500, answer.status
        assert len(scene.upstream.requests) == before
        return
    seen = scene.upstream.requests[-1]
    assert seen.target.startswith(BASE + b"/") or seen.target == BASE + target
    assert seen.header(b"host") == [scene.upstream.authority.encode()]
    if target.startswith(b"/"):
        assert seen.target == BASE + target


@pytest.mark.parametrize(
    ("api_url", "target", "expected"),
    [
        ("https://api.example.com/v2", b"https://api.example.com/x", b"/v2/x"),
        ("https://api.example.com/v2", b"https://API.example.com:443/x", b"/v2/x"),
        ("https://api.example.com/v2", b"http://api.example.com/x", b"/v2/x"),
        ("https://api.example.com/v2", b"http://api.example.com:80/x", b"/v2/x"),
        ("https://api.example.com/v2", b"https://api.example.com:8443/x", None),
        ("https://api.example.com/v2", b"http://api.example.com:443/x", b"/v2/x"),
        ("https://api.example.com:8443", b"https://api.example.com:8443/x", b"/x"),
        ("https://api.example.com:8443", b"http://api.example.com:8443/x", b"/x"),
        ("https://api.example.com:8443", b"https://api.example.com/x", None),
        ("https://api.example.com:8443", b"http://api.example.com/x", None),
        ("http://127.0.0.1:8000", b"http://127.0.0.1:8000/x", b"/x"),
        ("http://127.0.0.1:8000", b"http://127.0.0.1/x", None),
        ("http://127.0.0.1:8000", b"http://127.0.0.1:8001/x", None),
        ("http://127.0.0.1:8000", b"https://127.0.0.1:8000/x", None),
    ],
)
def test_absolute_uris_must_name_the_upstreams_port(
    api_url: str, target: bytes, expected: bytes | None
) -> None:
    """An absolute URI names the upstream only with its port (or the scheme's default for it); plain http
    may name an https upstream (HTTP_PROXY clients cannot ask for TLS), https never a plain one."""
    assert Target.from_url(api_url).target(target) == expected
