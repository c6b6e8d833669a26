"""--socket-allow-uid / --socket-allow-gid: the kernel's word on who connected decides, before any parsing."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from tokenrelay.lite import aip193
from tokenrelay.lite import socketclient as client
from tokenrelay.lite.socketclient import LocalApiError
from tokenrelay.serving import peercred
from tokenrelay.serving.peercred import Peer, Policy
from tokenrelay.sidecar.localapi import SocketServer
from tokenrelay.sidecar.settings import Settings

from ..support.security import API, ServeSocket, StaticTokens

NOBODY = 65534
OTHER_GROUP = 4242

# Run as another user: stdlib only, prints the status (and the refusal's reason), never the token.
CHILD = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/token HTTP/1.1\\r\\nHost: tokenrelay\\r\\nConnection: close\\r\\n\\r\\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
head, _, body = data.partition(b"\\r\\n\\r\\n")
status = head.split(b" ")[1].decode()
reason = json.loads(body)["details"][0]["reason"] if status != "200" else ""
print(status, reason)
"""


async def fetch(path: str) -> client.TokenReply:
    return await asyncio.to_thread(client.fetch_token, path)


async def test_listed_uid_is_served(serve_socket: ServeSocket) -> None:
    """A client whose uid is on --socket-allow-uid gets its token."""
    path = await serve_socket(socket_allow_uid=(12345, os.getuid()))
    reply = await fetch(path)
    assert reply.audience == "https://api.example"


async def test_listed_gid_is_served(serve_socket: ServeSocket) -> None:
    """A client whose primary gid is on --socket-allow-gid gets its token."""
    path = await serve_socket(socket_allow_gid=(os.getgid(),))
    assert (await fetch(path)).audience == "https://api.example"


async def test_unlisted_uid_gets_403_with_aip193_body(serve_socket: ServeSocket) -> None:
    """A client left off the lists gets a 403 PERMISSION_DENIED that names the flags, and the stdlib
    client (used by the credential helpers) reads it instead of a connection reset."""
    path = await serve_socket(socket_allow_uid=(12345,), socket_allow_gid=(23456,))
    with pytest.raises(LocalApiError) as caught:
        await fetch(path)
    assert caught.value.status == 403
    assert caught.value.reason == "PEER_NOT_ALLOWED"
    assert "--socket-allow-uid" in str(caught.value)
    assert "TOKENRELAY_SOCKET_ALLOW_GID" in str(caught.value)


async def test_a_peer_whose_credentials_cannot_be_read_is_refused(
    serve_socket: ServeSocket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the kernel's word on the peer cannot be read (SO_PEERCRED fails), the peer is refused with
    403 PEER_NOT_ALLOWED, not admitted: the same client was served while its credentials were readable."""
    path = await serve_socket(socket_allow_uid=(os.getuid(),))
    assert (await fetch(path)).audience == "https://api.example"

    def unreadable(sock: socket.socket) -> Peer:
        raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")

    monkeypatch.setattr(peercred, "peer_of", unreadable)
    with pytest.raises(LocalApiError) as caught:
        await fetch(path)
    assert (caught.value.status, caught.value.reason) == (403, "PEER_NOT_ALLOWED")


async def test_refusal_comes_before_the_request_is_parsed(serve_socket: ServeSocket) -> None:
    """A refused client gets the same 403 whatever it sends, even bytes that are not HTTP at all, and
    a refused client that keeps sending is cut off."""
    path = await serve_socket(socket_allow_uid=(12345,))
    for payload in (b"\x00\xff not http at all\r\n\r\n", b"GET /v1/token HTTP/1.1\r\n" + b"X: y\r\n" * 5000):
        status, body = await asyncio.to_thread(raw_exchange, path, payload)
        assert status == 403
        parsed = aip193.parse(body)
        assert parsed is not None
        assert parsed[0] == aip193.Code.PERMISSION_DENIED


def raw_exchange(path: str, payload: bytes) -> tuple[int, bytes]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(path)
        with contextlib.suppress(BrokenPipeError):  # cut off mid-send: the answer is still readable
            sock.sendall(payload)
        data = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def interpreter_for_others() -> str:
    """A Python that another user can execute (this venv's may live under root's 0700 home)."""
    for candidate in (
        os.path.realpath(sys.executable),
        shutil.which("python3", path="/usr/local/bin:/usr/bin"),
    ):
        if candidate and all(p.stat().st_mode & 0o001 for p in (Path(candidate), *Path(candidate).parents)):
            return candidate
    if os.environ.get("CI"):
        pytest.fail("no Python interpreter is executable by other users")
    pytest.skip("no Python interpreter is executable by other users")


async def as_user(path: str, uid: int, gid: int, groups: tuple[int, ...] = ()) -> str:
    """Run the stdlib client as uid/gid with the given supplementary groups; its one line of output."""
    process = await asyncio.create_subprocess_exec(
        interpreter_for_others(),
        "-I",
        "-c",
        CHILD,
        path,
        user=uid,
        group=gid,
        extra_groups=list(groups),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-500:]
    return out.decode().strip()


pytestmark_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another user")


@pytestmark_root
@pytest.mark.parametrize(
    ("allow", "groups", "expected"),
    [
        ({"socket_allow_uid": (0,)}, (), "403 PEER_NOT_ALLOWED"),
        ({"socket_allow_uid": (0, NOBODY)}, (), "200"),
        ({"socket_allow_gid": (OTHER_GROUP,)}, (), "403 PEER_NOT_ALLOWED"),
        ({"socket_allow_gid": (OTHER_GROUP,)}, (OTHER_GROUP,), "200"),
        ({"socket_allow_gid": (NOBODY,)}, (), "200"),
    ],
    ids=["uid-refused", "uid-allowed", "gid-refused", "supplementary-gid-allowed", "primary-gid-allowed"],
)
async def test_another_user_on_a_world_writable_socket(
    serve_socket: ServeSocket, allow: dict[str, tuple[int, ...]], groups: tuple[int, ...], expected: str
) -> None:
    """With the socket mode open to everyone (0666), only the allowed uid/gid (primary or supplementary)
    gets a token; nobody else gets past the 403."""
    path = await serve_socket(socket_mode=0o666, **allow)
    assert await as_user(path, NOBODY, NOBODY, groups) == expected


def test_policy_rules() -> None:
    """No list: everyone; a uid list: those uids; a gid list: primary or supplementary group; both: either."""
    me = Peer(pid=1, uid=1000, gid=1000)
    assert Policy().admits(me, lambda: ())
    assert Policy(uids=(1000,)).admits(me, lambda: ())
    assert not Policy(uids=(0,)).admits(me, lambda: (0,))
    assert Policy(gids=(27,)).admits(me, lambda: (4, 27))
    assert not Policy(gids=(27,)).admits(me, lambda: (4,))
    assert Policy(uids=(0,), gids=(1000,)).admits(me, lambda: ())


def test_gate_on_uvloop(short_dir: Path) -> None:
    """`tokenrelay run` serves on uvloop, whose transports differ from asyncio's: the gate admits and
    refuses there too."""
    uvloop = pytest.importorskip("uvloop")
    outcomes: list[str] = []

    async def scenario() -> None:
        for allow in ((os.getuid(),), (12345,)):
            config = Settings(
                auth_url="http://127.0.0.1:9",
                api_url=API,
                identity="x",
                socket=str(short_dir / f"uv{allow[0]}.sock"),
                socket_allow_uid=allow,
            )
            tokens = StaticTokens()
            server = SocketServer(config, tokens, tokens.ready)
            await server.start()
            try:
                outcomes.append((await fetch(config.socket)).audience)
            except LocalApiError as exc:
                outcomes.append(f"{exc.status} {exc.reason}")
            finally:
                await server.stop()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario())
    assert outcomes == [API, "403 PEER_NOT_ALLOWED"]
