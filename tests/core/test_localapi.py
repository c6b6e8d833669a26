"""The local API as a client sees it, over a real Unix socket."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tokenrelay.errors import ConfigError
from tokenrelay.lite import aip193
from tokenrelay.lite.timestamps import format_timestamp, parse_timestamp
from tokenrelay.serving.unixsocket import bind
from tokenrelay.sidecar.localapi import SocketServer
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import jti, make_jwt, refusal
from tokenrelay.tokens.provider import TokenProviders

from ..support.core import API, Harness

REGISTRY = "registry.example.test"


@pytest.fixture
async def served(harness: Harness, tmp_path: Path) -> AsyncIterator[tuple[Harness, str]]:
    providers = TokenProviders([harness.provider(API), harness.provider(REGISTRY, seed=2)])
    path = str(tmp_path / "run" / "tokenrelay.sock")
    settings = Settings(auth_url="http://x", api_url=API, identity="i", socket=path)
    server = SocketServer(settings, providers, providers.ready)
    await server.start()
    yield harness, path
    await server.stop()


async def _get(path: str, target: str, accept: str = "application/json") -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=path)) as session,
        session.get(f"http://tokenrelay{target}", headers={"Accept": accept}) as response,
    ):
        return response.status, await response.read()


async def test_token_defaults_to_the_api_audience(served: tuple[Harness, str]) -> None:
    """GET /v1/token answers token, expireTime (ms, UTC) and the API audience."""
    _, path = served
    status, body = await _get(path, "/v1/token")
    payload = json.loads(body)
    assert status == 200 and set(payload) == {"token", "expireTime", "audience"}
    assert payload["audience"] == API and jti(payload["token"]) == "t1"
    assert payload["expireTime"].endswith("Z") and len(payload["expireTime"]) == 24


async def test_token_for_another_configured_audience(served: tuple[Harness, str]) -> None:
    """?audience= selects one of the --audience values."""
    harness, path = served
    status, body = await _get(path, f"/v1/token?audience={REGISTRY}")
    assert status == 200 and json.loads(body)["audience"] == REGISTRY
    assert harness.service.seen_queries[-1]["aud"] == REGISTRY


async def test_plain_text_for_scripts(served: tuple[Harness, str]) -> None:
    """Accept: text/plain gets the bare token, nothing else."""
    harness, path = served
    status, body = await _get(path, "/v1/token", accept="text/plain")
    assert status == 200 and body.decode() == harness.service.issued[0]


async def test_unknown_audience_is_404_naming_the_flag(served: tuple[Harness, str]) -> None:
    """An audience tokenrelay was not told about gets code 5 and a hint to add --audience."""
    _, path = served
    status, body = await _get(path, "/v1/token?audience=other.example")
    parsed = aip193.parse(body)
    assert status == 404 and parsed is not None
    assert parsed[0] == 5 and "--audience other.example" in parsed[1]


async def test_no_token_is_503_with_the_reason(served: tuple[Harness, str]) -> None:
    """When the token service refuses, callers get 503, code 14, TOKEN_UNAVAILABLE and why."""
    harness, path = served

    async def refuse(request: web.Request) -> web.StreamResponse:
        return refusal(aip193.Code.PERMISSION_DENIED, "identity does not match the token's issuer", 403)

    harness.service.behaviour = refuse
    status, body = await _get(path, "/v1/token")
    payload = json.loads(body)
    assert status == 503 and payload["code"] == 14
    assert payload["details"] == [
        {"@type": aip193.ERROR_INFO_TYPE, "reason": "TOKEN_UNAVAILABLE", "domain": "tokenrelay"}
    ]
    assert "identity does not match the token's issuer" in payload["message"]


async def test_readyz_waits_for_every_audience(served: tuple[Harness, str]) -> None:
    """/readyz is 503 until every audience holds a token, then 200; /healthz is always 200."""
    _, path = served
    assert (await _get(path, "/healthz"))[0] == 200
    status, body = await _get(path, "/readyz")
    assert status == 503 and "no token yet" in json.loads(body)["message"]
    await _get(path, "/v1/token")
    status, body = await _get(path, "/readyz")
    assert status == 503 and REGISTRY in json.loads(body)["message"]
    await _get(path, f"/v1/token?audience={REGISTRY}")
    assert (await _get(path, "/readyz"))[0] == 200


async def test_socket_has_the_configured_mode(served: tuple[Harness, str]) -> None:
    """The socket is created with mode 0600 by default, in a parent directory created for it."""
    _, path = served
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [p for p in Path(path).parent.iterdir() if p.name.startswith(".tokenrelay-")]


def test_socket_mode_is_set_before_the_socket_appears(tmp_path: Path) -> None:
    """Bound with mode 0660 even under a permissive umask: never wider, not even for a moment."""
    old = os.umask(0)
    try:
        sock = bind(str(tmp_path / "s.sock"), 0o660)
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(os.stat(tmp_path / "s.sock").st_mode) == 0o660
        assert os.listdir(tmp_path) == ["s.sock"]  # the 0700 staging directory is gone
    finally:
        sock.close()


def test_stale_socket_is_replaced(tmp_path: Path) -> None:
    """A socket file left by a crashed process is removed and rebound: a client reaches the new one."""
    path = str(tmp_path / "s.sock")
    bind(path, 0o600).close()  # closed: nobody listens any more
    sock = bind(path, 0o600)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)  # refused if the stale file were still there
            accepted, _ = sock.accept()
            accepted.close()
    finally:
        sock.close()


def test_live_socket_is_not_stolen(tmp_path: Path) -> None:
    """A socket another process still serves on is left alone, with a clear error."""
    path = str(tmp_path / "s.sock")
    live = bind(path, 0o600)
    try:
        with pytest.raises(ConfigError, match="another process"):
            bind(path, 0o600)
    finally:
        live.close()


def test_regular_file_is_never_deleted(tmp_path: Path) -> None:
    """A --socket path that names an ordinary file is an error, and the file survives."""
    path = tmp_path / "important.txt"
    path.write_text("data")
    with pytest.raises(ConfigError, match="not a socket"):
        bind(str(path), 0o600)
    assert path.read_text() == "data"


async def test_concurrent_socket_callers_share_one_exchange(served: tuple[Harness, str]) -> None:
    """50 clients hitting the socket before any token exists cause one exchange."""
    harness, path = served
    harness.service.gate = asyncio.Event()
    calls = [asyncio.ensure_future(_get(path, "/v1/token")) for _ in range(50)]
    while harness.service.calls == 0:
        await asyncio.sleep(0.001)
    harness.service.gate.set()
    results = await asyncio.gather(*calls)
    assert {status for status, _ in results} == {200}
    assert harness.service.calls == 1


async def test_token_whose_exp_is_infinity_is_served_as_json(served: tuple[Harness, str]) -> None:
    """A token with ``exp: Infinity`` is served (with the documented hour as its expiry), not a bare 500."""
    harness, path = served

    async def infinite(request: web.Request) -> web.StreamResponse:
        return web.json_response({"token": make_jwt({"aud": API, "exp": float("inf")})})

    harness.service.behaviour = infinite
    status, body = await _get(path, "/v1/token")
    assert status == 200, body
    assert json.loads(body)["expireTime"] == format_timestamp(harness.clock.wall() + 3600)


async def _raw(path: str, *chunks: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``chunks`` over a fresh connection (a pause between them), read to EOF; the first answer."""
    reader, writer = await asyncio.open_unix_connection(path)
    for number, chunk in enumerate(chunks):
        if number:
            await asyncio.sleep(0.05)
        writer.write(chunk)
        await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body[: int(headers.get("Content-Length", len(body)))]


def _request(target: str, *fields: str, connection: str = "close") -> bytes:
    return "\r\n".join(
        [f"GET {target} HTTP/1.1", "Host: tokenrelay", *fields, f"Connection: {connection}", "", ""]
    ).encode()


# Headers that differ by design between aiohttp's answer and quicktoken's: aiohttp names itself and
# dates its answer; a keep-alive request is told keep-alive.
_INCIDENTAL = {"Server", "Date", "Connection", "Keep-Alive"}


@pytest.mark.parametrize("accept", ["application/json", "text/plain"])
@pytest.mark.parametrize(
    "target", ["/v1/token", f"/v1/token?audience={REGISTRY}", "/v1/token?audience=registry%2Eexample%2Etest"]
)
async def test_the_quick_answer_is_aiohttps_answer(
    served: tuple[Harness, str], accept: str, target: str
) -> None:
    """A one-shot request (Connection: close, as the helpers send) for a held token is answered before
    aiohttp parses it, with the status, headers and body aiohttp gives a keep-alive client."""
    _, path = served
    await _get(path, "/v1/token")
    await _get(path, f"/v1/token?audience={REGISTRY}")
    quick = await _raw(path, _request(target, f"Accept: {accept}"))
    slow = await _raw(
        path, _request(target, f"Accept: {accept}", connection="keep-alive") + _request("/healthz")
    )
    assert "Server" not in quick[1] and "Server" in slow[1]  # each took the path it was meant to
    assert quick[0] == slow[0] == 200
    assert quick[2] == slow[2]
    assert {k: v for k, v in quick[1].items() if k not in _INCIDENTAL} == {
        k: v for k, v in slow[1].items() if k not in _INCIDENTAL
    }


async def test_the_text_answer_states_the_expiry(served: tuple[Harness, str]) -> None:
    """Token-Expires-At is the JSON answer's expireTime in whole Unix seconds."""
    _, path = served
    _, body = await _get(path, "/v1/token")
    status, headers, _ = await _raw(path, _request("/v1/token", "Accept: text/plain"))
    assert status == 200
    assert headers["Token-Expires-At"] == str(int(parse_timestamp(json.loads(body)["expireTime"])))


@pytest.mark.parametrize(
    ("chunks", "status"),
    [
        ((b"GET /v1/token HTTP/1.1\r\nHost: t\r\n", b"Connection: close\r\n\r\n"), 200),  # head in two reads
        ((b"GET /v1/token?audience=other.example HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",), 404),
        ((b"GET /v1/token?audience=a+b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",), 404),
        ((b"GET /v1/token?audience=%FF HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",), 404),
        ((b"GET /v1/token?audience=x&audience=y HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",), 404),
        ((b"POST /v1/token HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nab",), 405),
        ((b"GET /v1/tokens HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",), 404),
        (
            (
                b"GET /v1/token HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
                b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
            ),
            400,  # aiohttp refuses data after Connection: close
        ),
        ((b"GET /v1/token HTTP/1.1\r\nConnection: close\r\n\r\n",), 400),
        ((b"GET /v1/token HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",), 400),
        ((b"GET /v1/token HTTP/1.1\r\nHost: t\r\nAccept : text/plain\r\nConnection: close\r\n\r\n",), 400),
        ((b"GET /v1/token HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\nConnection: close\r\n\r\n",), 400),
    ],
    ids=[
        "split-head",
        "unknown",
        "plus",
        "not-utf8",
        "repeated",
        "post",
        "other-path",
        "pipelined",
        "no-host",
        "two-hosts",
        "space-before-colon",
        "obs-fold",
    ],
)
async def test_requests_of_any_other_shape_get_aiohttps_answer(
    served: tuple[Harness, str], chunks: tuple[bytes, ...], status: int
) -> None:
    """Whatever is not exactly the hot request goes to aiohttp untouched and gets its answer."""
    _, path = served
    await _get(path, "/v1/token")
    answer = await _raw(path, *chunks)
    assert (answer[0], "Server" in answer[1]) == (status, True)
