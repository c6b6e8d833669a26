"""The credential helpers' protocol parsers under hostile input: docker's server string on stdin, git's
``key=value`` lines, kubelet's CredentialProviderRequest JSON.

Each input gets either the right answer (the token, for a configured host named in the input) or one
clear line (on the channel the protocol reads errors from), never a traceback, never an "internal
error", and never a token where errors go. Random bytes are fed through a text stream the way the
real ``sys.stdin`` decodes them (strict UTF-8, or surrogateescape under the C locale).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tokenrelay.helpers import docker, git, kubelet
from tokenrelay.helpers.hosts import load
from tokenrelay.helpers.source import Credential
from tokenrelay.testing import make_jwt

FUZZ = settings(max_examples=150, deadline=None)
TOKEN = make_jwt({"jti": "helper-token", "iat": 1_900_000_000, "exp": 1_900_003_600})
EXCHANGED = make_jwt({"jti": "exchanged", "iat": 1_900_000_000, "exp": 1_900_003_600})
SA_TOKEN = make_jwt({"sub": "system:serviceaccount:ci:builder", "exp": 1_900_003_600})
ENV = {
    "TOKENRELAY_HOSTS": "registry.example.com,127.0.0.1:5000=https://api.example,git.example.com",
    "TOKENRELAY_AUTH_URL": "https://auth.example",
    "TOKENRELAY_IDENTITY": "groups/acme/identities/ci",
    "TOKENRELAY_SOCKET": "/nonexistent/tokenrelay.sock",
}
HOSTS = load(ENV)
AUDIENCES = {host.audience: host for host in HOSTS}
SECRETS = (TOKEN, EXCHANGED, SA_TOKEN)
BIN = Path(sys.executable).parent
T = TypeVar("T")


class Fetches:
    """The helpers' token source and direct exchange, recording each audience asked for."""

    def __init__(self, service_account_token: str | None = None) -> None:
        self.audiences: list[str] = []
        self.exchanged: list[tuple[str, str]] = []  # (audience, identity)
        # the kubelet request's own token, when the test knows it (else the suite's SA_TOKEN)
        self.service_account_token = service_account_token

    def fetch(self, audience: str) -> Credential:
        self.audiences.append(audience)
        return Credential(TOKEN)

    def exchange(
        self, *, auth_url: str, audience: str, identity: str, id_token: str, timeout: float
    ) -> tuple[str, float | None]:
        own = SA_TOKEN if self.service_account_token is None else self.service_account_token.strip()
        assert id_token.strip() and id_token == own  # only ever the request's own token
        self.exchanged.append((audience, identity))
        return EXCHANGED, None


def stdin_of(raw: bytes, errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors=errors, newline="")


def assert_one_clear_line(text: str) -> None:
    """An error for a person: one line, from tokenrelay, no traceback, no internal error, no secret."""
    assert text.endswith("\n") and text.count("\n") == 1, text
    assert text.startswith("tokenrelay: ") or text == docker.NOT_FOUND + "\n", text
    assert "internal error" not in text, text
    assert "Traceback" not in text
    for secret in SECRETS:
        assert secret not in text and secret.split(".")[1] not in text


def named_host(text: str, audience: str) -> bool:
    """Whether the input names the configured host whose audience this is."""
    return AUDIENCES[audience].name in text.lower()


errors_modes = st.sampled_from(["strict", "surrogateescape"])
hosts_named = st.sampled_from(
    [
        "registry.example.com",
        "REGISTRY.Example.COM.",
        "registry.example.com:443",
        "127.0.0.1:5000",
        "git.example.com",
        "registry.example.com.evil.com",
        "evil.com/registry.example.com",
        "registry.example.com@evil.com",
        "evil.com#@registry.example.com",
        "registry.example.com\\@evil.com",
        "registry.example.com%2f@evil.com",
        "127.0.0.1",
        "[::1]:5000",
        "",
    ]
)
server_strings = st.builds(
    lambda scheme, user, host, path, pad: pad + scheme + user + host + path + pad,
    st.sampled_from(["", "https://", "http://", "HTTPS://", "docker://", "//"]),
    st.sampled_from(["", "user@", "u:p@"]),
    hosts_named,
    st.sampled_from(["", "/", "/v1/", "/v2/library/x", "?x=1", "#y", "/\x00", "\n\nmore"]),
    st.sampled_from(["", " ", "\n", "\r\n", "\t"]),
).map(str.encode)


@FUZZ
@given(
    action=st.sampled_from(["get", "get", "get", "store", "erase", "list", "version", "", "GET", "x\x00"]),
    raw=st.one_of(server_strings, st.binary(max_size=120)),
    errors=errors_modes,
)
def test_docker_helper_answers_or_says_why(action: str, raw: bytes, errors: str) -> None:
    """docker's ``get`` gets the token only for a configured host that the server string names, else
    ``credentials not found`` (nothing on stderr) or one ``tokenrelay:`` line on stdout and the same
    line on stderr (the docker CLI shows only stderr), exit 1."""
    fetches = Fetches()
    out, err = io.StringIO(), io.StringIO()
    status = docker.handle(action, stdin_of(raw, errors), out, environ=ENV, fetch=fetches.fetch, stderr=err)
    event(f"exit {status}{', token' if fetches.audiences else ''}")  # --hypothesis-show-statistics
    if status == 0 or out.getvalue() == docker.NOT_FOUND + "\n":
        assert err.getvalue() == ""
    else:
        assert err.getvalue() == out.getvalue()
    if status == 0:
        if action == "get":
            answer = json.loads(out.getvalue())
            assert answer == {"ServerURL": answer["ServerURL"], "Username": "_token", "Secret": TOKEN}
            assert answer["ServerURL"] == raw.decode("utf-8", errors).strip()
            (audience,) = fetches.audiences
            assert named_host(answer["ServerURL"], audience)
        else:
            assert fetches.audiences == []
            assert TOKEN not in out.getvalue()
        return
    assert status == 1
    assert_one_clear_line(out.getvalue())


@pytest.mark.parametrize(
    "server",
    [
        "registry.example.com.evil.com",
        "https://registry.example.com@evil.com/",
        "https://evil.com#@registry.example.com",
        "evil.com/registry.example.com",
        "https://registry.example.com\\@evil.com",
        "registry.example.com:5000",
        "http://registry.example.com/",
    ],
)
def test_docker_lookalike_servers_get_no_token(server: str) -> None:
    """Look-alike server strings (suffix domains, userinfo and fragment tricks, another port or scheme)
    get ``credentials not found``: docker carries on anonymously, and no token was even fetched."""
    fetches = Fetches()
    out = io.StringIO()
    assert docker.handle("get", io.StringIO(server), out, environ=ENV, fetch=fetches.fetch) == 1
    assert out.getvalue() == docker.NOT_FOUND + "\n"
    assert fetches.audiences == []


git_keys = st.sampled_from(
    [
        "protocol",
        "host",
        "path",
        "url",
        "username",
        "password",
        "capability[]",
        "wwwauth[]",
        "state[]",
        "",
        "host ",
        "HOST",
        "=",
        "quit",
    ]
)
git_values = st.one_of(
    hosts_named,
    st.sampled_from(["https", "http", "HTTPS", "ssh", "authtype", "state", "https://git.example.com/x.git"]),
    st.text(max_size=30),
)
git_lines = st.builds(
    lambda pairs, newline, end: newline.join(f"{k}={v}" for k, v in pairs) + end,
    # what git sends (protocol, host) plus odd extra lines, in any order
    st.builds(
        lambda protocol, host, extra: [("protocol", protocol), ("host", host), *extra],
        st.sampled_from(["https", "http", "HTTPS", "ssh", ""]),
        hosts_named,
        st.lists(st.tuples(git_keys, git_values), max_size=4),
    ).flatmap(st.permutations),
    st.sampled_from(["\n", "\r\n", "\n\n"]),
    st.sampled_from(["", "\n", "\n\n", "\x00", "\nnot a pair\n"]),
).map(str.encode)


@FUZZ
@given(
    action=st.sampled_from(["get", "get", "get", "store", "erase", "capability", ""]),
    raw=st.one_of(git_lines, st.binary(max_size=120)),
    errors=errors_modes,
)
def test_git_helper_answers_or_says_why(action: str, raw: bytes, errors: str) -> None:
    """git's ``get`` gets ``username``/``password`` (or an ephemeral Bearer ``credential``) only for a
    configured host named in its input, or nothing; unreadable input gets one ``tokenrelay:`` line on
    stderr and exit 1; the token never goes to stderr."""
    fetches = Fetches()
    out, err = io.StringIO(), io.StringIO()
    status = git.handle(action, stdin_of(raw, errors), out, environ=ENV, fetch=fetches.fetch, stderr=err)
    event(f"exit {status}{', token' if fetches.audiences else ''}")
    if status == 1:
        assert out.getvalue() == ""
        assert_one_clear_line(err.getvalue())
        return
    assert status == 0
    assert err.getvalue() == ""
    if not out.getvalue():
        return
    assert action == "get"
    lines = dict(line.split("=", 1) for line in out.getvalue().splitlines())
    assert lines.get("password", lines.get("credential")) == TOKEN
    assert set(lines) in (
        {"username", "password", "password_expiry_utc"},
        {"capability[]", "authtype", "credential", "ephemeral", "password_expiry_utc"},
    )
    (audience,) = fetches.audiences
    assert named_host(raw.decode("utf-8", errors), audience)


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)
images = st.builds(
    lambda host, name, tag: host + name + tag,
    st.sampled_from(
        [
            "",
            "registry.example.com/",
            "127.0.0.1:5000/",
            "evil.com/",
            "REGISTRY.EXAMPLE.COM/",
            "registry.example.com.evil.com/",
            "localhost/",
            " ",
        ]
    ),
    st.sampled_from(["app", "library/app", "a/b/c", "", "registry.example.com"]),
    st.sampled_from(["", ":1.0", "@sha256:" + "0" * 64, ":"]),
)


def mostly(valid: st.SearchStrategy[T], other: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``valid`` three times in four, else ``other`` (st.one_of would favour the richer ``other``)."""
    return st.sampled_from([True, True, True, False]).flatmap(lambda good: valid if good else other)


kubelet_requests = st.fixed_dictionaries(
    {
        "apiVersion": mostly(st.just(kubelet.API_VERSION), json_values),
        "kind": mostly(st.just("CredentialProviderRequest"), json_values),
        "image": mostly(images, json_values),
        # present (possibly blank) three times in four, a string when present three times in four
        "serviceAccountToken": mostly(
            mostly(st.sampled_from([SA_TOKEN, SA_TOKEN, "", "  "]), json_values), st.none()
        ),
    },
    optional={
        "serviceAccountAnnotations": st.one_of(
            st.just({kubelet.IDENTITY_ANNOTATION: "groups/acme/identities/pod"}),
            st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=2),
            json_values,
        ),
        "extra": json_values,
    },
)
kubelet_inputs = mostly(
    kubelet_requests.map(lambda request: json.dumps(request).encode()),
    st.one_of(
        kubelet_requests.map(lambda request: json.dumps(request).encode()[:-3]),
        json_values.map(lambda value: json.dumps(value).encode()),
        st.sampled_from(
            [b"[" * 5000 + b"]" * 5000, b'{"a":' * 3000 + b"1" + b"}" * 3000, b"NaN", b"1e999999"]
        ),
        st.binary(max_size=120),
    ),
)
GO_DURATION = re.compile(r"^(\d+h\d+m\d+s|\d+m\d+s|\d+s)$")


def _service_account_token(raw: bytes, errors: str) -> str | None:
    """The ``serviceAccountToken`` a request carries, if it parses as one."""
    try:
        request = json.loads(raw.decode("utf-8", errors))
    except (ValueError, RecursionError):
        return None
    token = request.get("serviceAccountToken") if isinstance(request, dict) else None
    return token if isinstance(token, str) else None


@FUZZ
@given(raw=kubelet_inputs, errors=errors_modes, hosts=st.sampled_from([ENV["TOKENRELAY_HOSTS"], ""]))
def test_kubelet_provider_answers_or_says_why(raw: bytes, errors: str, hosts: str) -> None:
    """A CredentialProviderRequest gets a response naming the image's registry (the token only when it
    is configured; the exchanged one when the pod's service-account token came along), anything else
    one ``tokenrelay:`` line on stderr and exit 1, with neither token nor service-account token in it."""
    fetches = Fetches(_service_account_token(raw, errors))
    out, err = io.StringIO(), io.StringIO()
    env = dict(ENV, TOKENRELAY_HOSTS=hosts)
    status = kubelet.handle(
        stdin_of(raw, errors),
        out,
        err,
        environ=env,
        fetch=fetches.fetch,
        exchange=fetches.exchange,
        wall=lambda: 1_900_000_100.0,
    )
    event(
        f"exit {status}{', token' if fetches.audiences else ''}{', exchanged' if fetches.exchanged else ''}"
    )
    if status == 1:
        assert out.getvalue() == ""
        assert_one_clear_line(err.getvalue())
        return
    assert status == 0
    assert err.getvalue() == ""
    request = json.loads(raw.decode("utf-8", errors))
    response = json.loads(out.getvalue())
    assert response["apiVersion"] == kubelet.API_VERSION
    assert response["kind"] == "CredentialProviderResponse"
    assert response["cacheKeyType"] == "Registry"
    if not response["auth"]:
        assert not fetches.audiences and not fetches.exchanged
        return
    registry = kubelet.registry_of(request["image"])
    assert response["auth"] == {
        registry: {"username": "_token", "password": response["auth"][registry]["password"]}
    }
    assert GO_DURATION.match(response["cacheDuration"])
    if (request.get("serviceAccountToken") or "").strip():
        assert response["auth"][registry]["password"] == EXCHANGED
        ((audience, _),) = fetches.exchanged
    else:
        assert response["auth"][registry]["password"] == TOKEN
        (audience,) = fetches.audiences
    assert named_host(registry, audience)


Run = Callable[..., subprocess.CompletedProcess[bytes]]


@pytest.mark.parametrize(
    ("command", "stdin", "status"),
    [
        (["docker-credential-tokenrelay", "get"], b"\xff\xfe\x00registry.example.com", 1),
        (["docker-credential-tokenrelay", "get"], b"registry.example.com.evil.com\n", 1),
        (["git-credential-tokenrelay", "get"], b"host=\xffgit.example.com\n\n", None),
        (["git-credential-tokenrelay", "get"], b"\x00\x01\x02", 1),
        (["tokenrelay", "kubelet-credential-provider"], b'{"apiVersion": "\xff"}', 1),
        (["tokenrelay", "kubelet-credential-provider"], b"[" * 100_000, 1),
    ],
    ids=["docker-binary", "docker-lookalike", "git-binary-host", "git-nul", "kubelet-binary", "kubelet-deep"],
)
@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_installed_helpers_say_one_line_and_no_traceback(
    command: list[str], stdin: bytes, status: int | None, locale: str
) -> None:
    """The installed helpers, fed garbage through a real pipe under a UTF-8 and the C locale: exit 1 with
    one clear line, or (git, for a host it cannot match) exit 0 and nothing, so git asks its next helper;
    never a traceback."""
    env = dict(ENV, LC_ALL=locale, LANG=locale, PYTHONUTF8="0")
    done = subprocess.run(
        [str(BIN / command[0]), *command[1:]], input=stdin, capture_output=True, env=env, timeout=30
    )
    said = (done.stdout + done.stderr).decode("utf-8", "replace")
    if status is None and done.returncode == 0:  # decoded with surrogateescape: a host nobody configured
        assert said == ""
        return
    assert done.returncode == 1, said
    assert_one_clear_line(said)
