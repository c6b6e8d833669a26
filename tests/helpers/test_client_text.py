"""The docker helper's quick path: the bare token from the local API, asked for as text/plain."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.helpers.source import CredentialError, fetch
from tokenrelay.lite.redact import fingerprint
from tokenrelay.lite.socketclient import LocalApiError, fetch_token, fetch_token_bare, fetch_token_text
from tokenrelay.lite.timestamps import parse_timestamp

from ..support.helpers import Stack, run, script
from ..support.paths import short_dir


def test_text_token_is_the_json_token(stack: Stack) -> None:
    """The text/plain answer is the same current token the JSON answer carries."""
    audience = stack.registry.netloc
    assert fingerprint(fetch_token_text(stack.socket, audience)) == stack.current(audience)
    assert fingerprint(fetch(audience, {"TOKENRELAY_SOCKET": stack.socket}).token) == (
        fingerprint(fetch_token(stack.socket, audience).token)
    )


def test_text_answer_states_the_expiry_of_the_json_answer(stack: Stack) -> None:
    """The text/plain answer's Token-Expires-At is the JSON answer's expireTime, in Unix seconds: the
    expiry git is told, without decoding JSON or the token."""
    audience = stack.registry.netloc
    reply = fetch_token(stack.socket, audience)
    token, expires_at = fetch_token_bare(stack.socket, audience)
    assert fingerprint(token) == fingerprint(reply.token)
    assert expires_at == int(parse_timestamp(reply.expire_time))
    credential = fetch(audience, {"TOKENRELAY_SOCKET": stack.socket})
    assert credential.expires_at == expires_at
    assert credential.expiry() == expires_at


def test_text_refusal_is_the_sidecars_message(stack: Stack) -> None:
    """An audience the sidecar does not serve is refused in its own words, with status and reason."""
    with pytest.raises(LocalApiError) as caught:
        fetch_token_text(stack.socket, "unknown.example")
    assert caught.value.status == 404
    assert caught.value.reason
    assert "--audience unknown.example" in str(caught.value)
    with pytest.raises(CredentialError, match="has no token: .*--audience unknown.example"):
        fetch("unknown.example", {"TOKENRELAY_SOCKET": stack.socket})


@pytest.fixture
def canned() -> Iterator[tuple[str, list[bytes]]]:
    """A Unix-socket server that answers each connection with the next canned reply."""
    workdir = str(short_dir("trc-"))
    path = f"{workdir}/s.sock"
    replies: list[bytes] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(replies.pop(0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, replies
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(10)
    Path(path).unlink(missing_ok=True)
    Path(workdir).rmdir()


@pytest.mark.parametrize(
    "body", [b"", b'{"token": "t", "expireTime": "2030-01-01T00:00:00.000Z", "audience": "a"}', b"a b"]
)
def test_text_body_that_is_not_a_token_is_refused(canned: tuple[str, list[bytes]], body: bytes) -> None:
    """A 200 whose body is empty or not one bare token (a sidecar that ignored Accept) is an error."""
    path, replies = canned
    replies.append(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    with pytest.raises(LocalApiError, match="answered an unexpected body"):
        fetch_token_text(path, "a")


@pytest.mark.parametrize(
    "header", [b"", b"Token-Expires-At: soon\r\n", b"Token-Expires-At: -5\r\n", b"Token-Expires-At: 1e99\r\n"]
)
def test_a_missing_or_malformed_expiry_header_leaves_the_expiry_unknown(
    canned: tuple[str, list[bytes]], header: bytes
) -> None:
    """A sidecar that states no usable expiry (an older one, or a garbled header) still hands out the
    token; the expiry is then read from the token, not guessed."""
    path, replies = canned
    replies.append(b"HTTP/1.1 200 OK\r\n%sContent-Length: 5\r\n\r\ntoken" % header)
    assert fetch_token_bare(path, "a") == ("token", None)


def test_text_refusal_that_is_not_aip193_names_the_status(canned: tuple[str, list[bytes]]) -> None:
    """A refusal without an AIP-193 body is reported by its HTTP status."""
    path, replies = canned
    replies.append(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\noops")
    with pytest.raises(LocalApiError, match="answered HTTP 502") as caught:
        fetch_token_text(path, "a")
    assert caught.value.status == 502


def test_docker_helper_reports_a_sidecar_refusal(stack: Stack, client_env: dict[str, str]) -> None:
    """The installed helper turns a sidecar refusal into one line on stdout (and stderr), exit status 1."""
    env = client_env | {"TOKENRELAY_HOSTS": "unknown.example"}
    result = run([script("docker-credential-tokenrelay"), "get"], env, "unknown.example")
    assert result.returncode == 1
    assert result.stdout.startswith(f"tokenrelay: the tokenrelay sidecar at {stack.socket} has no token: ")
    assert "--audience unknown.example" in result.stdout
    assert result.stdout.count("\n") == 1
    assert result.stderr == result.stdout


def test_a_garbled_chunked_answer_is_a_local_api_error(tmp_path: Path) -> None:
    """A process at the socket that answers with broken chunked framing gets the local API's own
    error (which `tokenrelay token` prints as one line), not a bare ValueError."""
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nx\r\n0\r\n\r\n")

        thread = threading.Thread(target=answer)
        thread.start()
        with pytest.raises(LocalApiError, match="does not speak the tokenrelay local API"):
            fetch_token(path, "aud", timeout=5)
        thread.join()
