"""docker-credential-tokenrelay's protocol as a pure function: what docker, skopeo and podman read back."""

from __future__ import annotations

import io
import json

import pytest

from tokenrelay.helpers.docker import NOT_FOUND, handle
from tokenrelay.helpers.source import Credential, CredentialError
from tokenrelay.lite.redact import fingerprint

from ..support.helpers import jwt_for

ENV = {"TOKENRELAY_HOSTS": "registry.example.com,127.0.0.1:5000=reg-aud"}


class Fetcher:
    """Stands in for the sidecar: records audiences, answers a token per audience or raises."""

    def __init__(self, error: Exception | None = None) -> None:
        self.audiences: list[str] = []
        self.tokens: dict[str, str] = {}
        self.error = error

    def __call__(self, audience: str) -> Credential:
        self.audiences.append(audience)
        if self.error is not None:
            raise self.error
        self.tokens[audience] = jwt_for(audience)
        return Credential(self.tokens[audience])


def call(
    action: str, stdin: str = "", env: dict[str, str] | None = None, fetch: Fetcher | None = None
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = handle(
        action,
        io.StringIO(stdin),
        out,
        environ=ENV if env is None else env,
        fetch=fetch or Fetcher(),
        stderr=err,
    )
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "server", ["registry.example.com", "https://registry.example.com/v2/", "registry.example.com\n"]
)
def test_get_answers_token_for_configured_host(server: str) -> None:
    """``get`` answers ServerURL as given, Username ``_token`` and the host's token."""
    fetch = Fetcher()
    status, out, _ = call("get", server, fetch=fetch)
    assert status == 0
    answer = json.loads(out)
    assert answer["ServerURL"] == server.strip()
    assert answer["Username"] == "_token"
    assert fingerprint(answer["Secret"]) == fingerprint(fetch.tokens["registry.example.com"])
    assert set(answer) == {"ServerURL", "Username", "Secret"}


def test_get_uses_the_configured_audience() -> None:
    """A host listed as ``host=audience`` is answered with that audience's token."""
    fetch = Fetcher()
    assert call("get", "127.0.0.1:5000", fetch=fetch)[0] == 0
    assert fetch.audiences == ["reg-aud"]


@pytest.mark.parametrize(
    "server", ["other.example.com", "127.0.0.1:5001", "https://index.docker.io/v1/", "a b"]
)
def test_get_other_host_is_exactly_not_found(server: str) -> None:
    """Any other host gets exactly the not-found text with exit 1, and no token is fetched."""
    fetch = Fetcher()
    status, out, err = call("get", server, fetch=fetch)
    assert (status, out, err) == (1, NOT_FOUND + "\n", "")
    assert fetch.audiences == []


@pytest.mark.parametrize(
    ("action", "stdin", "error"),
    [
        ("get", "registry.example.com", CredentialError("no tokenrelay sidecar is listening at /x.sock")),
        ("get", "", None),
        ("frobnicate", "", None),
        ("get", "registry.example.com", RuntimeError("boom")),
    ],
)
def test_every_failure_is_also_on_stderr(action: str, stdin: str, error: Exception | None) -> None:
    """Every failure but not-found writes its one line to stderr too: the docker CLI shows only that."""
    status, out, err = call(action, stdin, fetch=Fetcher(error))
    assert status == 1
    assert out.startswith("tokenrelay: ")
    assert out.count("\n") == 1
    assert err == out


def test_get_without_hosts_configured_explains_on_stderr() -> None:
    """With no hosts configured every host is not found, and stderr says what to set."""
    status, out, err = call("get", "registry.example.com", env={})
    assert (status, out) == (1, NOT_FOUND + "\n")
    assert "TOKENRELAY_HOSTS" in err


@pytest.mark.parametrize(
    ("stdin", "message"), [("", "got nothing"), ("   \n", "got nothing"), ("x" * 70000, "over 64 KiB")]
)
def test_get_malformed_stdin_is_one_line(stdin: str, message: str) -> None:
    """Empty or oversized stdin is one line on stdout saying what was expected."""
    status, out, _ = call("get", stdin)
    assert status == 1
    assert out.count("\n") == 1
    assert message in out


def test_get_non_utf8_stdin_is_one_line() -> None:
    """Bytes that are not UTF-8 give one clear line, not a traceback."""
    out = io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b"\xff\xfe registry"), encoding="utf-8")
    assert handle("get", stdin, out, environ=ENV, fetch=Fetcher()) == 1
    assert (
        out.getvalue()
        == "tokenrelay: stdin is not UTF-8 text; it should be a server such as registry.example.com\n"
    )


def test_get_sidecar_failure_is_one_line_without_secrets() -> None:
    """A failed fetch is the error's one line on stdout, exit 1."""
    fetch = Fetcher(CredentialError("no tokenrelay sidecar is listening at /x: start `tokenrelay run`"))
    status, out, _ = call("get", "registry.example.com", fetch=fetch)
    assert (status, out) == (
        1,
        "tokenrelay: no tokenrelay sidecar is listening at /x: start `tokenrelay run`\n",
    )


def test_get_unexpected_failure_never_shows_a_traceback_or_its_text() -> None:
    """An unexpected exception becomes a one-line internal error that does not echo its message."""
    secret = jwt_for("registry.example.com")
    status, out, _ = call("get", "registry.example.com", fetch=Fetcher(RuntimeError(secret)))
    assert status == 1
    assert out == "tokenrelay: internal error (RuntimeError); please report it\n"


def test_get_with_malformed_hosts_names_the_variable() -> None:
    """A malformed TOKENRELAY_HOSTS is reported naming the variable."""
    status, out, _ = call("get", "registry.example.com", env={"TOKENRELAY_HOSTS": "https://x"})
    assert status == 1
    assert out.startswith("tokenrelay: TOKENRELAY_HOSTS: 'https://x' is not host[:port][=audience]")


@pytest.mark.parametrize(
    "stdin",
    [
        '{"ServerURL": "registry.example.com", "Username": "u", "Secret": "s"}',
        "registry.example.com",
        "garbage",
    ],
)
@pytest.mark.parametrize("action", ["store", "erase"])
def test_store_and_erase_accept_and_ignore(action: str, stdin: str) -> None:
    """``docker login``/``logout`` through the helper succeed and store nothing."""
    fetch = Fetcher()
    assert call(action, stdin, fetch=fetch) == (0, "", "")
    assert fetch.audiences == []


def test_list_names_configured_hosts_with_token_username() -> None:
    """``list`` maps every configured host to ``_token``."""
    status, out, _ = call("list")
    assert status == 0
    assert json.loads(out) == {"registry.example.com": "_token", "127.0.0.1:5000": "_token"}


def test_version_and_unknown_action() -> None:
    """``version`` names the helper; an unknown action is one usage line with exit 1."""
    status, out, _ = call("version")
    assert status == 0
    assert out.startswith("docker-credential-tokenrelay (tokenrelay) ")
    status, out, _ = call("frobnicate")
    assert status == 1
    assert "usage: docker-credential-tokenrelay get|store|erase|list|version" in out
