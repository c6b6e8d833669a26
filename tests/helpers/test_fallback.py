"""The direct exchange when no sidecar answers, and its private on-disk cache."""

from __future__ import annotations

import json
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tokenrelay.emulator.platforms.registry import PlatformEndpoints
from tokenrelay.emulator.sts.issuer import Issuer, SigningKey
from tokenrelay.helpers import direct as fallback
from tokenrelay.helpers.source import CredentialError, fetch
from tokenrelay.lite import aip193
from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.lite.redact import fingerprint
from tokenrelay.testing import FakeTokenService, ThreadedServer, jti, make_jwt, refusal

from ..support.helpers import Stack, run, script


@pytest.fixture
def service() -> Iterator[tuple[FakeTokenService, ThreadedServer]]:
    fake = FakeTokenService()
    server = ThreadedServer(fake.app()).start()
    yield fake, server
    server.stop()


@pytest.fixture
def env(service: tuple[FakeTokenService, ThreadedServer], tmp_path: Path) -> dict[str, str]:
    """No sidecar at the socket; the fallback's variables set; a private cache directory."""
    id_token = tmp_path / "oidc-token"
    id_token.write_text(make_jwt({"sub": "ci", "exp": int(time.time()) + 86400}) + "\n")
    return {
        "TOKENRELAY_SOCKET": str(tmp_path / "no-sidecar.sock"),
        "TOKENRELAY_AUTH_URL": service[1].url + "/",
        "TOKENRELAY_IDENTITY": "org/identities/ci",
        "TOKENRELAY_ID_TOKEN_FILE": str(id_token),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }


def cache_files(env: dict[str, str]) -> list[Path]:
    directory = Path(env["XDG_CACHE_HOME"]) / "tokenrelay"
    return sorted(directory.iterdir()) if directory.exists() else []


def test_exchanges_directly_and_caches_privately(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """Without a sidecar the helper exchanges itself, caching in a 0700 directory as one 0600 file."""
    fake, _ = service
    first = fetch("registry.example.com", env)
    assert jti(first.token) == "t1"
    assert fake.seen_queries == [{"aud": "registry.example.com", "identity": "org/identities/ci"}]
    directory = Path(env["XDG_CACHE_HOME"]) / "tokenrelay"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    [file] = cache_files(env)  # no temporary file left behind
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert "registry.example.com" not in file.name
    second = fetch("registry.example.com", env)
    assert jti(second.token) == "t1"
    assert fake.calls == 1
    assert jti(fetch("other.example.com", env).token) == "t2"


def test_cached_token_is_replaced_when_under_five_minutes_remain(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """A cached token is reused while at least 5 minutes remain, and replaced after."""
    fake, _ = service
    now = time.time()
    assert jti(fallback.fetch("aud", env, wall=lambda: now).token) == "t1"
    assert jti(fallback.fetch("aud", env, wall=lambda: now + 3600 - 301).token) == "t1"
    assert jti(fallback.fetch("aud", env, wall=lambda: now + 3600 - 299).token) == "t2"
    assert fake.calls == 2


def test_loose_cache_permissions_are_not_trusted(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """A cache file others could read is ignored and rewritten; a loose directory is tightened."""
    fetch("aud", env)
    [file] = cache_files(env)
    file.chmod(0o644)
    file.parent.chmod(0o755)
    assert jti(fetch("aud", env).token) == "t2"
    assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(file.stat().st_mode) == 0o600


def test_corrupt_cache_is_replaced(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """A cache file that is not what we wrote is ignored, not an error."""
    fetch("aud", env)
    [file] = cache_files(env)
    file.write_text("{not json")
    assert jti(fetch("aud", env).token) == "t2"
    assert json.loads(file.read_text())["expiry"] > time.time()


def test_refusal_is_reported_in_the_services_words(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """A refusal names the service's message and reason, never the OIDC token."""
    fake, _ = service

    async def deny(request: web.Request) -> web.Response:
        return refusal(
            aip193.Code.PERMISSION_DENIED, "identity does not match the token's subject", 403, "NO_MATCH"
        )

    fake.behaviour = deny
    with pytest.raises(CredentialError) as caught:
        fetch("aud", env)
    message = str(caught.value)
    assert "refused the exchange for audience aud: identity does not match the token's subject" in message
    assert "reason NO_MATCH, HTTP 403" in message
    assert fingerprint(fake.seen_id_tokens[0]) not in message
    assert fake.seen_id_tokens[0] not in message
    assert cache_files(env) == []


def test_redirect_is_not_followed(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """A redirect from the token service is refused: the OIDC token would travel with it."""
    fake, _ = service

    async def moved(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "http://127.0.0.1:9/elsewhere"})

    fake.behaviour = moved
    with pytest.raises(
        CredentialError, match=re.escape("HTTP 302 redirecting to http://127.0.0.1:9/elsewhere; not followed")
    ):
        fetch("aud", env)
    assert fake.calls == 1


def test_unreachable_service_names_the_address(env: dict[str, str]) -> None:
    """A token service that does not answer is named in the error, with the variable to check, in the
    words the sidecar uses (not urllib's "<urlopen error [Errno 111] ...>")."""
    env["TOKENRELAY_AUTH_URL"] = "http://127.0.0.1:9"
    with pytest.raises(CredentialError) as raised:
        fetch("aud", env)
    assert str(raised.value) == (
        "cannot reach the token service at http://127.0.0.1:9/sts/exchange (connection refused): "
        "check TOKENRELAY_AUTH_URL"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no OIDC token file at .*; mount .*point TOKENRELAY_ID_TOKEN_FILE at the token file itself$"),
        ("", "is empty"),
        (make_jwt({"exp": 1_000_000_000}), "expired at 2001-09-09T01:46:40.000Z"),
    ],
)
def test_unusable_oidc_token_is_explained(env: dict[str, str], content: str | None, message: str) -> None:
    """A missing, empty or expired OIDC token is one clear error naming where it was read."""
    path = Path(env["TOKENRELAY_ID_TOKEN_FILE"])
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    with pytest.raises(CredentialError, match=message):
        fetch("aud", env)


def test_oidc_token_from_a_named_variable(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """TOKENRELAY_ID_TOKEN_ENV names the variable holding the OIDC token."""
    fake, _ = service
    del env["TOKENRELAY_ID_TOKEN_FILE"]
    env |= {"TOKENRELAY_ID_TOKEN_ENV": "CI_JOB_JWT", "CI_JOB_JWT": "opaque-oidc"}
    fetch("aud", env)
    assert fake.seen_id_tokens == ["opaque-oidc"]
    env["CI_JOB_JWT"] = " "
    env["TOKENRELAY_CONFIG"] = ""
    with pytest.raises(CredentialError, match="environment variable CI_JOB_JWT"):
        fetch("other", env)


def test_without_fallback_settings_the_error_says_what_to_set(tmp_path: Path) -> None:
    """No sidecar and no fallback: the error names the socket and the variables to set."""
    with pytest.raises(CredentialError) as caught:
        fetch("aud", {"TOKENRELAY_SOCKET": str(tmp_path / "none.sock")})
    message = str(caught.value)
    assert f"no tokenrelay sidecar is listening at {tmp_path / 'none.sock'}" in message
    assert "TOKENRELAY_AUTH_URL, TOKENRELAY_IDENTITY and TOKENRELAY_ID_TOKEN_FILE" in message


def test_a_sidecar_refusal_is_not_worked_around(stack: Stack, env: dict[str, str]) -> None:
    """When the sidecar answers (here: audience not configured), its answer stands; no direct exchange."""
    env["TOKENRELAY_SOCKET"] = stack.socket
    with pytest.raises(CredentialError, match=re.escape("--audience unknown.example")):
        fetch("unknown.example", env)
    assert cache_files(env) == []


def test_docker_helper_falls_back_and_reuses_the_cache(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """The installed docker helper exchanges on its first run and answers from the cache on the next."""
    fake, _ = service
    env |= {"TOKENRELAY_HOSTS": "registry.example.com", "PATH": "/usr/bin:/bin"}
    for _ in range(2):
        result = run([script("docker-credential-tokenrelay"), "get"], env, "registry.example.com")
        assert result.returncode == 0, result.stdout
        assert jti(json.loads(result.stdout)["Secret"]) == "t1"
    assert fake.calls == 1


def test_opaque_oidc_token_quoted_back_in_a_refusal_is_removed(
    service: tuple[FakeTokenService, ThreadedServer], env: dict[str, str]
) -> None:
    """An OIDC token that is not a JWT, echoed in a refusal, stays out of the helper's error."""
    fake, _ = service
    Path(env["TOKENRELAY_ID_TOKEN_FILE"]).write_text("opaque-oidc-value\n")

    async def echo(request: web.Request) -> web.Response:
        bearer = request.headers["Authorization"].removeprefix("Bearer ")
        return refusal(aip193.Code.UNAUTHENTICATED, f"unknown token {bearer}", 401)

    fake.behaviour = echo
    with pytest.raises(CredentialError) as caught:
        fetch("aud", env)
    assert "opaque-oidc-value" not in str(caught.value)
    assert "unknown token [secure]" in str(caught.value)


@pytest.fixture
def gcp_metadata() -> Iterator[tuple[PlatformEndpoints, str]]:
    """The emulator's platform endpoints (here: the GCP metadata server's) on a loopback thread."""
    platforms = PlatformEndpoints(Issuer(SigningKey.generate(), lambda: ""))
    app = web.Application()
    platforms.add_routes(app, lambda request, what: None)
    server = ThreadedServer(app).start()
    yield platforms, server.url
    server.stop()


def test_the_direct_exchange_reads_through_any_source(
    service: tuple[FakeTokenService, ThreadedServer],
    env: dict[str, str],
    gcp_metadata: tuple[PlatformEndpoints, str],
) -> None:
    """TOKENRELAY_ID_TOKEN_SOURCE=gcp: the helper mints at the metadata server for the auth URL."""
    fake, _ = service
    platforms, url = gcp_metadata
    del env["TOKENRELAY_ID_TOKEN_FILE"]
    env |= {"TOKENRELAY_ID_TOKEN_SOURCE": "gcp", "GCE_METADATA_HOST": url.removeprefix("http://")}
    fetch("aud", env)
    claims = unverified_claims(fake.seen_id_tokens[0])
    assert claims is not None
    assert (claims["iss"], claims["aud"]) == (
        "https://accounts.google.com",
        env["TOKENRELAY_AUTH_URL"].rstrip("/"),
    )
    assert platforms.calls == {"gcp": 1}


def test_an_unknown_source_is_one_line_naming_the_variable(env: dict[str, str]) -> None:
    """A misspelt TOKENRELAY_ID_TOKEN_SOURCE names the variable and the sources there are."""
    env["TOKENRELAY_ID_TOKEN_SOURCE"] = "gitlab-ci"
    with pytest.raises(
        CredentialError, match=r"TOKENRELAY_ID_TOKEN_SOURCE: 'gitlab-ci' is not one of file, env, "
    ):
        fetch("aud", env)
