"""The kubelet image credential provider: requests in, CredentialProviderResponses out."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from tokenrelay.helpers.kubelet import (
    IDENTITY_ANNOTATION,
    cache_seconds,
    go_duration,
    handle,
    registry_of,
)
from tokenrelay.helpers.source import Credential, CredentialError
from tokenrelay.lite.redact import fingerprint
from tokenrelay.testing import jti, make_jwt

from ..support.helpers import Stack, run, script

NOW = 1_800_000_000.0
API = "credentialprovider.kubelet.k8s.io/v1"
ENV = {
    "TOKENRELAY_HOSTS": "registry.example.com,127.0.0.1:5000=reg",
    "TOKENRELAY_AUTH_URL": "https://sts.example",
}


def request(image: str = "registry.example.com/team/app:1.0", **extra: Any) -> str:
    return json.dumps({"apiVersion": API, "kind": "CredentialProviderRequest", "image": image, **extra})


def token(audience: str, iat: float, exp: float) -> str:
    return make_jwt({"jti": "t9", "aud": audience, "iat": int(iat), "exp": int(exp)})


class Calls:
    def __init__(self) -> None:
        self.fetched: list[str] = []
        self.exchanged: list[tuple[str, str, str, str]] = []

    def fetch(self, audience: str) -> Credential:
        self.fetched.append(audience)
        return Credential(token(audience, NOW - 600, NOW + 3000))  # an hour-long token, 10 min old

    def exchange(
        self, *, auth_url: str, audience: str, identity: str, id_token: str, timeout: float
    ) -> tuple[str, None]:
        self.exchanged.append((auth_url, audience, identity, fingerprint(id_token)))
        return token(audience, NOW, NOW + 3600), None


def call(stdin: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any] | None, str, Calls]:
    calls = Calls()
    out, err = io.StringIO(), io.StringIO()
    status = handle(
        io.StringIO(stdin),
        out,
        err,
        environ=ENV if env is None else env,
        fetch=calls.fetch,
        exchange=calls.exchange,
        wall=lambda: NOW,
    )
    return status, json.loads(out.getvalue()) if out.getvalue() else None, err.getvalue(), calls


def test_without_service_account_token_uses_the_node_socket() -> None:
    """No serviceAccountToken: the sidecar's token, keyed by registry, cached until its refresh point."""
    status, response, err, calls = call(request())
    assert (status, err) == (0, "")
    assert response is not None
    auth = response.pop("auth")
    assert response == {
        "apiVersion": API,
        "kind": "CredentialProviderResponse",
        "cacheKeyType": "Registry",
        "cacheDuration": "17m0s",  # refresh at 45% of 3600 s = 1620 s after iat; 600 s have passed
    }
    assert list(auth) == ["registry.example.com"]
    assert auth["registry.example.com"]["username"] == "_token"
    assert jti(auth["registry.example.com"]["password"]) == "t9"
    assert calls.fetched == ["registry.example.com"]


def test_service_account_token_is_exchanged_for_the_annotated_identity() -> None:
    """KEP-4412: the pod's token is exchanged for the identity its service account names."""
    sa_token = make_jwt({"sub": "system:serviceaccount:team:builder"})
    stdin = request(
        "127.0.0.1:5000/team/app@sha256:" + "a" * 64,
        serviceAccountToken=sa_token,
        serviceAccountAnnotations={IDENTITY_ANNOTATION: "org/identities/team-builder"},
    )
    status, response, _, calls = call(stdin, {**ENV, "TOKENRELAY_IDENTITY": "org/identities/node"})
    assert status == 0
    assert response is not None
    assert calls.exchanged == [
        ("https://sts.example", "reg", "org/identities/team-builder", fingerprint(sa_token))
    ]
    assert calls.fetched == []
    assert list(response["auth"]) == ["127.0.0.1:5000"]
    assert response["cacheDuration"] == "27m0s"  # 45% of a fresh hour


def test_service_account_token_falls_back_to_the_identity_flag() -> None:
    """Without the annotation, --identity / TOKENRELAY_IDENTITY names the identity."""
    stdin = request(serviceAccountToken="sa.jwt.x", serviceAccountAnnotations={})
    status, _, _, calls = call(stdin, {**ENV, "TOKENRELAY_IDENTITY": "org/identities/node"})
    assert status == 0
    assert calls.exchanged[0][2] == "org/identities/node"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (ENV, "annotate it with tokenrelay.dev/identity, or pass --identity"),
        (
            {"TOKENRELAY_HOSTS": "registry.example.com", "TOKENRELAY_IDENTITY": "i"},
            "--auth-url (env TOKENRELAY_AUTH_URL) must be an http:// or https:// URL",
        ),
    ],
)
def test_service_account_path_explains_missing_settings(env: dict[str, str], message: str) -> None:
    """A service-account token without an identity or token service is one stderr line saying what to set."""
    status, response, err, _ = call(request(serviceAccountToken="sa.jwt.x"), env)
    assert (status, response) == (1, None)
    assert message in err
    assert err.count("\n") == 1


def test_unconfigured_registry_gets_empty_auth() -> None:
    """An image on a host that is not configured gets no credentials, so kubelet pulls anonymously."""
    status, response, _, calls = call(request("nginx:latest", serviceAccountToken="sa.jwt.x"))
    assert status == 0
    assert response is not None
    assert response["auth"] == {}
    assert response["cacheKeyType"] == "Registry"
    assert (calls.fetched, calls.exchanged) == ([], [])


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("{", "it is not JSON"),
        ("[]", "not a JSON object"),
        (request().replace(API, "credentialprovider.kubelet.k8s.io/v1alpha1"), "apiVersion"),
        (request().replace("CredentialProviderRequest", "Pod"), "kind 'Pod'"),
        (request(""), 'no "image" string'),
        (request(serviceAccountToken=3), '"serviceAccountToken" is not a string'),
        (request(serviceAccountAnnotations={"a": 1}), "not a map of strings"),
    ],
)
def test_malformed_requests_are_one_stderr_line(stdin: str, message: str) -> None:
    """A request the provider cannot read: one line on stderr, nothing on stdout, exit 1."""
    status, response, err, _ = call(stdin)
    assert (status, response) == (1, None)
    assert err.startswith("tokenrelay: kubelet sent a request this provider cannot read: ")
    assert message in err


def test_fetch_failure_is_one_stderr_line() -> None:
    """No sidecar and no fallback: one stderr line, non-zero exit, nothing on stdout."""
    out, err = io.StringIO(), io.StringIO()

    def fail(audience: str) -> Credential:
        raise CredentialError("no tokenrelay sidecar is listening at /s")

    status = handle(io.StringIO(request()), out, err, environ=ENV, fetch=fail, wall=lambda: NOW)
    assert (status, out.getvalue(), err.getvalue()) == (
        1,
        "",
        "tokenrelay: no tokenrelay sidecar is listening at /s\n",
    )


@pytest.mark.parametrize(
    ("issued", "expires", "seconds"),
    [
        (NOW, NOW + 3600, 1620),
        (NOW - 1620, NOW + 1980, 0),  # at the refresh point: kubelet must not cache
        (NOW - 3000, NOW + 600, 0),  # a stale token still served: not cached
        (None, NOW + 3600, 1620),  # no iat: the documented hour
        (NOW, None, 0),
    ],
)
def test_cache_duration_ends_before_the_refresh_point(
    issued: float | None, expires: float | None, seconds: int
) -> None:
    """cacheDuration runs to 45% of the token's life (the sidecar's earliest refresh), never past it."""
    assert cache_seconds(issued, expires, NOW) == seconds


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (45, "45s"), (1620, "27m0s"), (3723, "1h2m3s")])
def test_go_duration(seconds: int, text: str) -> None:
    """Durations are written the way Go prints them, which kubelet parses."""
    assert go_duration(seconds) == text


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("nginx", "docker.io"),
        ("library/nginx:1", "docker.io"),
        ("registry.example.com/a/b:1", "registry.example.com"),
        ("localhost/a", "localhost"),
        ("127.0.0.1:5000/a@sha256:00", "127.0.0.1:5000"),
    ],
)
def test_registry_of_image(image: str, registry: str) -> None:
    """The registry host is the image's first part when it looks like a host, else Docker Hub."""
    assert registry_of(image) == registry


def test_real_command_answers_from_the_sidecar(stack: Stack, client_env: dict[str, str]) -> None:
    """``tokenrelay kubelet-credential-provider`` answers kubelet with the sidecar's current token."""
    image = f"{stack.registry.netloc}/demo/app:v1"
    result = run([script("tokenrelay"), "kubelet-credential-provider"], client_env, request(image))
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    password = response["auth"][stack.registry.netloc]["password"]
    assert fingerprint(password) == stack.current(stack.registry.netloc)
    assert response["cacheKeyType"] == "Registry"


def test_real_command_exchanges_a_service_account_token(stack: Stack, client_env: dict[str, str]) -> None:
    """With serviceAccountToken the provider exchanges it at --auth-url for the annotated identity."""
    sa_token = make_jwt({"sub": "system:serviceaccount:team:builder", "exp": 4_000_000_000})
    image = f"{stack.registry.netloc}/demo/app:v1"
    stdin = request(
        image, serviceAccountToken=sa_token, serviceAccountAnnotations={IDENTITY_ANNOTATION: "org/team"}
    )
    argv = [script("tokenrelay"), "kubelet-credential-provider", "--auth-url", stack.token_server.url]
    result = run(argv, client_env, stdin)
    assert result.returncode == 0, result.stderr
    password = json.loads(result.stdout)["auth"][stack.registry.netloc]["password"]
    assert fingerprint(password) in {fingerprint(t) for t in stack.service.issued}
    index = [fingerprint(t) for t in stack.service.seen_id_tokens].index(fingerprint(sa_token))
    assert stack.service.seen_queries[index] == {"aud": stack.registry.netloc, "identity": "org/team"}
