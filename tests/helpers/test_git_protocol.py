"""git-credential-tokenrelay's protocol as a pure function: what git reads back."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenrelay.errors import InputError
from tokenrelay.helpers.git import handle, parse
from tokenrelay.helpers.source import Credential, CredentialError
from tokenrelay.lite.redact import fingerprint

from ..support.helpers import jwt_for

ENV = {"TOKENRELAY_HOSTS": "git.example.com,127.0.0.1:8080=code"}


def call(
    action: str, stdin: str, fetch_error: Exception | None = None, env: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str, list[str]]:
    audiences: list[str] = []
    tokens: dict[str, str] = {}

    def fetch(audience: str) -> Credential:
        audiences.append(audience)
        if fetch_error is not None:
            raise fetch_error
        tokens["last"] = jwt_for(audience, exp=2_000_000_000)
        return Credential(tokens["last"])

    out, err = io.StringIO(), io.StringIO()
    status = handle(
        action, io.StringIO(stdin), out, environ=ENV if env is None else env, fetch=fetch, stderr=err
    )
    lines = [line for line in out.getvalue().split("\n") if line]
    answer = dict(line.split("=", 1) for line in lines)
    if "password" in answer:
        answer["password"] = fingerprint(answer["password"])
    if "credential" in answer:
        answer["credential"] = fingerprint(answer["credential"])
    if "last" in tokens:
        answer["expected"] = fingerprint(tokens["last"])
    return status, answer, err.getvalue(), audiences


def test_get_answers_username_password_and_expiry() -> None:
    """A configured host gets ``username=_token``, the token as password and its expiry."""
    status, answer, err, audiences = call(
        "get", "protocol=https\nhost=git.example.com\npath=org/repo.git\n\n"
    )
    assert (status, err, audiences) == (0, "", ["git.example.com"])
    assert answer.pop("password") == answer.pop("expected")
    assert answer == {"username": "_token", "password_expiry_utc": "2000000000"}


@pytest.mark.parametrize("exp", [253402300800, float("inf"), float("nan")], ids=["year-10000", "inf", "nan"])
def test_an_exp_no_timestamp_can_show_gives_no_expiry_line(exp: float) -> None:
    """A token whose exp is past year 9999, Infinity or NaN is answered without an expiry, not an error."""
    out, err = io.StringIO(), io.StringIO()
    token = jwt_for("git.example.com", exp=exp)
    stdin = io.StringIO("protocol=https\nhost=git.example.com\n\n")
    status = handle("get", stdin, out, environ=ENV, fetch=lambda _: Credential(token), stderr=err)
    assert (status, err.getvalue()) == (0, "")
    assert out.getvalue() == f"username=_token\npassword={token}\n"


def test_get_with_authtype_capability_answers_bearer() -> None:
    """When git announces ``capability[]=authtype`` the answer is an ephemeral Bearer credential."""
    stdin = "capability[]=authtype\ncapability[]=state\nprotocol=https\nhost=git.example.com\n"
    status, answer, _, _ = call("get", stdin)
    assert status == 0
    assert answer.pop("credential") == answer.pop("expected")
    assert answer == {
        "capability[]": "authtype",
        "authtype": "Bearer",
        "ephemeral": "1",
        "password_expiry_utc": "2000000000",
    }


def test_get_host_with_port_and_audience() -> None:
    """``host`` carries the port; a loopback http host is served with its configured audience."""
    status, answer, _, audiences = call("get", "protocol=http\nhost=127.0.0.1:8080\n")
    assert status == 0
    assert audiences == ["code"]
    assert answer["username"] == "_token"


def test_get_url_form() -> None:
    """A description given as ``url=`` (as ``git credential fill`` accepts) is understood too."""
    status, answer, _, _ = call("get", "url=https://git.example.com/org/repo.git\n")
    assert (status, answer["username"]) == (0, "_token")


@pytest.mark.parametrize(
    "stdin",
    [
        "protocol=https\nhost=other.example.com\n",
        "protocol=http\nhost=git.example.com\n",  # plain http off loopback
        "protocol=https\nhost=git.example.com:444\n",
        "protocol=cert\nhost=git.example.com\n",
        "protocol=https\n",
        "",
    ],
)
def test_get_other_hosts_print_nothing(stdin: str) -> None:
    """Other hosts, plain http off loopback and descriptions without a host: nothing, exit 0."""
    status, answer, err, audiences = call("get", stdin)
    assert (status, answer, err, audiences) == (0, {}, "", [])


def test_lines_after_the_blank_line_are_ignored() -> None:
    """The description ends at the first blank line."""
    assert parse("protocol=https\nhost=a\n\nhost=b\n") == {"protocol": ["https"], "host": ["a"]}


@pytest.mark.parametrize("stdin", ["protocol=https\nthis is not a pair\n", "=x\n", "host=a\0b\n"])
def test_malformed_input_is_one_line_on_stderr(stdin: str) -> None:
    """Input that is not key=value is one stderr line naming the problem, exit 1."""
    status, answer, err, _ = call("get", stdin)
    assert (status, answer) == (1, {})
    assert err.startswith("tokenrelay: git sent input this helper cannot read: line ")
    assert err.count("\n") == 1


def test_fetch_failure_is_one_line_on_stderr() -> None:
    """No token for a configured host: git shows one line saying what to fix."""
    status, answer, err, _ = call(
        "get",
        "protocol=https\nhost=git.example.com\n",
        CredentialError("no tokenrelay sidecar is listening at /s"),
    )
    assert (status, answer) == (1, {})
    assert err == "tokenrelay: no tokenrelay sidecar is listening at /s\n"


@pytest.mark.parametrize("action", ["store", "erase", "frobnicate", ""])
def test_other_actions_are_ignored(action: str) -> None:
    """store/erase and unknown actions read their input, print nothing and succeed."""
    status, answer, err, audiences = call(
        action, "protocol=https\nhost=git.example.com\nusername=x\npassword=y\n"
    )
    assert (status, answer, err, audiences) == (0, {}, "", [])


@given(st.text(max_size=200))
def test_parser_accepts_or_raises_input_error(text: str) -> None:
    """Any stdin parses or raises InputError; the helper never fails another way on it."""
    try:
        attributes = parse(text)
    except InputError:
        return
    assert all(key and "=" not in key for key in attributes)
