"""``tokenrelay go-auth``, the GOAUTH command: go's credential-set grammar, the hosts it answers for,
its failures, and what a run imports. (go itself drives it in tests/render/test_real_clients.py.)"""

from __future__ import annotations

import base64
import io
import subprocess

import pytest

from tokenrelay.errors import CredentialError
from tokenrelay.helpers import Credential
from tokenrelay.helpers.goauth import handle
from tokenrelay.lite.redact import fingerprint

from ..support.helpers import Stack, script
from .test_real_clients import HEAVY, imported_by

HOSTS = "goproxy.example.com,mods.example.com:8443=goproxy.example.com,other.example.com"


def parse_user_auth(data: str) -> dict[str, dict[str, str]]:
    """go's ``parseUserAuth`` (cmd/go/internal/auth/userauth.go): URL lines, a blank line, header lines,
    a blank line; each URL's prefix (without https://) to its headers."""
    credentials: dict[str, dict[str, str]] = {}
    while data:
        urls = []
        while True:
            line, sep, data = data.partition("\n")
            assert sep, "missing empty line after URLs"
            if not line:
                break
            assert line.startswith("https://")
            urls.append(line.removeprefix("https://"))
        headers = {}
        while True:
            line, sep, data = data.partition("\n")
            assert sep, "missing empty line after headers"
            if not line:
                break
            name, colon, value = line.partition(": ")
            assert colon, "invalid header line"
            headers[name] = value
        credentials.update(dict.fromkeys(urls, headers))
    return credentials


def basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"_token:{token}".encode()).decode()


def answer(action: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = handle(
        action,
        io.StringIO(stdin),
        out,
        environ={"TOKENRELAY_HOSTS": HOSTS},
        fetch=lambda audience: Credential(f"token-for-{audience}"),
        stderr=err,
    )
    return status, out.getvalue(), err.getvalue()


def test_the_first_call_answers_every_host_in_gos_grammar() -> None:
    """With no argument, every configured host gets ``Authorization: Basic`` of ``_token`` and its
    audience's token; hosts sharing an audience share one credential set."""
    status, out, _ = answer("")
    assert status == 0
    assert parse_user_auth(out) == {
        "goproxy.example.com/": {"Authorization": basic("token-for-goproxy.example.com")},
        "mods.example.com:8443/": {"Authorization": basic("token-for-goproxy.example.com")},
        "other.example.com/": {"Authorization": basic("token-for-other.example.com")},
    }
    assert out.count("Authorization") == 2


def test_a_url_gets_its_host_only_and_a_stranger_nothing() -> None:
    """Called again with the refused URL (and go's response on stdin), it answers for that host only;
    a URL on no configured host gets an empty answer, and go carries on without credentials."""
    refusal = "HTTP/1.1 401 Unauthorized\nContent-Length: 0\n\n"
    status, out, _ = answer("https://mods.example.com:8443/example.test/x/@v/list", refusal)
    assert (status, parse_user_auth(out)) == (
        0,
        {"mods.example.com:8443/": {"Authorization": basic("token-for-goproxy.example.com")}},
    )
    assert answer("https://proxy.golang.org/x/@v/list", refusal)[:2] == (0, "")


def test_a_failure_is_one_line_and_status_1() -> None:
    """No token: one ``tokenrelay:`` line on stderr, nothing on stdout, exit status 1."""

    def refuse(audience: str) -> Credential:
        raise CredentialError("no tokenrelay sidecar is listening at /nowhere")

    out, err = io.StringIO(), io.StringIO()
    status = handle("", io.StringIO(), out, environ={"TOKENRELAY_HOSTS": HOSTS}, fetch=refuse, stderr=err)
    assert (status, out.getvalue()) == (1, "")
    assert err.getvalue() == "tokenrelay: no tokenrelay sidecar is listening at /nowhere\n"


@pytest.mark.e2e
def test_go_auth_against_the_sidecar(stack: Stack, client_env: dict[str, str]) -> None:
    """The installed ``tokenrelay go-auth`` hands out the sidecar's current token for a configured host."""
    result = subprocess.run(
        [script("tokenrelay"), "go-auth", f"https://{stack.registry.netloc}/mod/@v/list"],
        input="HTTP/1.1 401 Unauthorized\n\n",
        env=client_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (header,) = parse_user_auth(result.stdout).values()
    user, _, token = base64.b64decode(header["Authorization"].removeprefix("Basic ")).decode().partition(":")
    assert user == "_token"
    assert fingerprint(token) == stack.current(stack.registry.netloc)


@pytest.mark.e2e
def test_go_auth_loads_nothing_heavy(stack: Stack, client_env: dict[str, str]) -> None:
    """``tokenrelay go-auth`` answers before the CLI's argparse and config load, and imports no aiohttp,
    jwt, ssl, json or re: go runs it at its first fetch and at every refusal. (Run as ``-m tokenrelay``:
    pip's console-script wrapper imports ``re`` itself, before any of tokenrelay.)"""
    loaded = imported_by(["-m", "tokenrelay", "go-auth"], "", client_env)
    assert "tokenrelay.helpers.goauth" in loaded
    heavy = {name for name in loaded if name.split(".")[0] in HEAVY or name in HEAVY}
    assert heavy | ({"argparse", "json", "re", "typing", "tokenrelay.options"} & loaded) == set()
