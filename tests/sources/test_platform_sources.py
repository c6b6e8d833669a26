"""Each OIDC token source against its platform as the emulator plays it: real endpoints on loopback,
the command-based ones as real subprocesses, and the token exchanged at the emulator's token service."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.iam import identities
from tokenrelay.emulator.platforms.base import ORG_UUID
from tokenrelay.emulator.platforms.registry import PLATFORMS
from tokenrelay.errors import ConfigError, IdTokenError
from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.tokens import sts
from tokenrelay.tokens.idsources import SOURCES, Source, SourceInputs, explained

from ..support.platforms import environment

PLATFORM_SOURCES = [name for name in SOURCES if name in PLATFORMS]
AUDIENCE_FIXED = {"azure-pipelines": "api://AzureADTokenExchange"}  # Entra ID's token exchange


def build(
    name: str,
    emulator: Emulator,
    http: aiohttp.ClientSession,
    env: dict[str, str],
    *,
    id_token_env: str | None = None,
    settings: dict[str, str] | None = None,
) -> Source:
    inputs = SourceInputs(
        environ=env,
        audience=emulator.base_url,
        session=http,
        id_token_env=id_token_env,
        settings=settings or {},
    )
    return SOURCES[name].build(inputs)


@pytest.mark.parametrize("name", PLATFORM_SOURCES)
async def test_each_source_reads_its_platforms_token_and_the_token_service_takes_it(
    name: str, emulator: Emulator, http: aiohttp.ClientSession, bin_dir: Path
) -> None:
    """Each source reads a token with its platform's issuer and subject, which an identity whose
    claimMatch names them exchanges for an API token."""
    source = build(name, emulator, http, environment(name, emulator, bin_dir))
    token = await source.read()
    claims = unverified_claims(token.value)
    assert claims is not None
    platform = PLATFORMS[name]
    assert claims["iss"] == platform.issuer
    assert claims["aud"] == AUDIENCE_FIXED.get(name, emulator.base_url)
    org = emulator.organization("acme")
    identity = identities.create(
        emulator.resources,
        org.uid,
        {"name": "ci", "claimMatch": {"issuer": platform.issuer, "subject": claims["sub"]}},
    )
    issued = await sts.exchange(
        http, emulator.base_url, emulator.base_url, identity.uid, token.value, timeout=5.0
    )
    assert issued.token
    assert token.value not in repr(source)


async def test_minting_sources_mint_afresh_at_every_read(
    emulator: Emulator, http: aiohttp.ClientSession, bin_dir: Path
) -> None:
    """A source that mints asks its platform at every read: two reads, two tokens, two calls."""
    for name in ("github-actions", "azure-pipelines", "gcp", "azure", "buildkite", "circleci"):
        source = build(name, emulator, http, environment(name, emulator, bin_dir))
        first, second = await source.read(), await source.read()
        assert first.value != second.value, name
    assert emulator.platforms.calls == {
        "github-actions": 2,
        "azure-pipelines": 2,
        "gcp": 2,
        "azure": 2,
        "buildkite": 2,
        "circleci": 2,
    }


async def test_subjects_have_the_platforms_shapes(
    emulator: Emulator, http: aiohttp.ClientSession, bin_dir: Path
) -> None:
    """The emulated platforms' subjects are shaped as the platforms document them."""
    subjects = {}
    for name in PLATFORM_SOURCES:
        token = await build(name, emulator, http, environment(name, emulator, bin_dir)).read()
        claims = unverified_claims(token.value)
        assert claims is not None
        subjects[name] = claims["sub"]
    assert subjects["github-actions"] == "repo:acme/app:ref:refs/heads/main"
    assert subjects["gitlab"] == "project_path:acme/app:ref_type:branch:ref:main"
    assert subjects["buildkite"].startswith("organization:acme:pipeline:app:ref:refs/heads/main:commit:")
    assert subjects["buildkite"].endswith(":step:build")
    assert subjects["azure-pipelines"] == "sc://acme/app/deploy"
    assert subjects["gcp"].isdigit()
    assert subjects["circleci"].startswith(f"org/{ORG_UUID}/project/")


async def test_gitlab_reads_the_variable_named_by_id_token_env(
    emulator: Emulator, http: aiohttp.ClientSession
) -> None:
    """GitLab's id_tokens variable is TOKENRELAY_ID_TOKEN unless --id-token-env names another."""
    env = environment("gitlab", emulator)
    env["VAULT_ID_TOKEN"] = env.pop("TOKENRELAY_ID_TOKEN")
    source = build("gitlab", emulator, http, env)
    with pytest.raises(IdTokenError, match="^GitLab CI variable TOKENRELAY_ID_TOKEN is not set$") as unset:
        await source.read()
    assert explained(source, unset.value).message.startswith(
        "GitLab CI variable TOKENRELAY_ID_TOKEN is not set; declare `id_tokens: {TOKENRELAY_ID_TOKEN:"
    )
    assert await build("gitlab", emulator, http, env, id_token_env="VAULT_ID_TOKEN").read()


async def test_circleci_prefers_the_v2_variable_without_the_cli(
    emulator: Emulator, http: aiohttp.ClientSession
) -> None:
    """Without the circleci CLI on PATH, CIRCLE_OIDC_TOKEN_V2 is read, else CIRCLE_OIDC_TOKEN."""
    env = environment("circleci", emulator)
    v2 = env["CIRCLE_OIDC_TOKEN_V2"]
    env["CIRCLE_OIDC_TOKEN"] = environment("circleci", emulator)["CIRCLE_OIDC_TOKEN_V2"]
    assert (await build("circleci", emulator, http, env).read()).value == v2
    del env["CIRCLE_OIDC_TOKEN_V2"]
    assert (await build("circleci", emulator, http, env).read()).value == env["CIRCLE_OIDC_TOKEN"]
    del env["CIRCLE_OIDC_TOKEN"]
    with pytest.raises(IdTokenError, match="neither CIRCLE_OIDC_TOKEN_V2 nor CIRCLE_OIDC_TOKEN is set"):
        await build("circleci", emulator, http, env).read()


async def test_a_failing_command_is_quoted_without_secrets(
    emulator: Emulator, http: aiohttp.ClientSession, bin_dir: Path
) -> None:
    """buildkite-agent's own failure is one line quoting its words; a missing agent names PATH."""
    env = environment("buildkite", emulator, bin_dir)
    del env["BUILDKITE_AGENT_ACCESS_TOKEN"]
    with pytest.raises(IdTokenError) as failed:
        await build("buildkite", emulator, http, env).read()
    assert str(failed.value) == (
        "`buildkite-agent oidc request-token` failed with exit status 1: buildkite-agent: fatal: "
        "BUILDKITE_AGENT_ACCESS_TOKEN is not set: run inside a job"
    )
    with pytest.raises(IdTokenError, match="buildkite-agent is not on PATH"):
        await build("buildkite", emulator, http, environment("buildkite", emulator)).read()


async def test_a_refusal_quotes_the_platforms_own_words(
    emulator: Emulator, http: aiohttp.ClientSession
) -> None:
    """The metadata server's refusal reaches the error in its own words, with the endpoint named."""
    env = environment("gcp", emulator)
    source = SOURCES["gcp"].build(SourceInputs(environ=env, audience="", session=http))
    with pytest.raises(IdTokenError) as refused:
        await source.read()
    host = env["GCE_METADATA_HOST"]
    assert str(refused.value) == (
        f"the GCP metadata server at {host} answered HTTP 400: non-empty audience parameter required"
    )


async def test_azure_prefers_the_app_service_endpoint(
    emulator: Emulator, http: aiohttp.ClientSession
) -> None:
    """With IDENTITY_ENDPOINT and IDENTITY_HEADER set, Azure's source asks that endpoint, not IMDS."""
    env = {
        "IDENTITY_ENDPOINT": emulator.base_url + "/platforms/azure/msi/token",
        "IDENTITY_HEADER": "secret-header",
        "AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:9",  # IMDS would fail
    }
    source = build("azure", emulator, http, env)
    assert source.description == "Azure's managed identity endpoint (IDENTITY_ENDPOINT)"
    assert await source.read()
    assert "secret-header" not in repr(source)


async def test_azure_pipelines_needs_its_service_connection(
    emulator: Emulator, http: aiohttp.ClientSession
) -> None:
    """Azure Pipelines without a service connection id is refused at start, naming the flag and variable."""
    env = environment("azure-pipelines", emulator)
    del env["AZURESUBSCRIPTION_SERVICE_CONNECTION_ID"]
    with pytest.raises(
        ConfigError, match="--azure-service-connection-id .* else AZURESUBSCRIPTION_SERVICE_CONNECTION_ID"
    ):
        build("azure-pipelines", emulator, http, env)
    source = build("azure-pipelines", emulator, http, env, settings={"azure_service_connection_id": "c0ffee"})
    assert "c0ffee" in source.description and await source.read()


@pytest.mark.parametrize("name", ["gcp", "azure"])
async def test_a_metadata_server_that_never_answers_is_one_line(
    name: str, http: aiohttp.ClientSession, silent_port: int
) -> None:
    """A metadata endpoint that accepts and never answers costs the bounded timeout, then one line."""
    address = f"127.0.0.1:{silent_port}"
    env = {"GCE_METADATA_HOST": address, "AZURE_POD_IDENTITY_AUTHORITY_HOST": f"http://{address}"}
    inputs = SourceInputs(
        environ=env, audience="https://auth.example", session=http, timeout=0.3, connect_timeout=0.2
    )
    with pytest.raises(IdTokenError) as silent:
        await SOURCES[name].build(inputs).read()
    assert "did not answer" in str(silent.value) and "\n" not in str(silent.value)


def test_the_emulate_mint_platforms_are_the_played_ones() -> None:
    """`tokenrelay emulate mint --platform` offers exactly the platforms the emulator plays."""
    from tokenrelay.emulator.cli import PLATFORM_NAMES

    assert set(PLATFORM_NAMES) == set(PLATFORMS)
    assert json.loads(json.dumps(sorted(PLATFORMS)))


def test_the_stand_in_commands_start_without_aiohttp() -> None:
    """A stand-in runs once per exchange, like the real command: it loads neither aiohttp nor the API."""
    import subprocess
    import sys

    code = (
        "import sys; from tokenrelay.emulator import cli; "
        "print(sorted(m for m in ('aiohttp', 'tokenrelay.emulator.app') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# Each platform's secret as its platform sets it, beside what the source needs to build.
DECLARED = {
    "azure": (
        {"IDENTITY_ENDPOINT": "http://127.0.0.1:9/msi", "IDENTITY_HEADER": "x/identity header"},
        "x/identity header",
    ),
    "github-actions": (
        {
            "ACTIONS_ID_TOKEN_REQUEST_URL": "http://127.0.0.1:9/t?sig=0123456789abcdef01",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "gh-req",
        },
        "gh-req",
    ),
    "azure-pipelines": (
        {
            "SYSTEM_OIDCREQUESTURI": "http://127.0.0.1:9/oidc",
            "SYSTEM_ACCESSTOKEN": "ado-access",
            "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID": "c",
        },
        "ado-access",
    ),
    "buildkite": ({"BUILDKITE_AGENT_ACCESS_TOKEN": "bk-agent-access"}, "bk-agent-access"),
    "aws": ({"AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": "aws+secret/key"}, "aws+secret/key"),
}


@pytest.mark.parametrize("name", list(DECLARED))
def test_a_platforms_secret_quoted_back_in_any_form_is_taken_out_of_the_failure(name: str) -> None:
    """Whatever a platform quotes back of the secret the source sent it (as sent, percent-encoded, as
    a form field), the failure line a user reads (``explained``) has [secure] in its place."""
    from urllib.parse import quote, quote_plus

    env, secret = DECLARED[name]
    source = SOURCES[name].build(SourceInputs(environ=env, audience="https://api.example.test"))
    echoed = f"denied {secret} / {quote(secret, safe='')} / {quote_plus(secret)}"
    line = explained(source, IdTokenError(echoed)).message
    assert line.startswith("denied [secure] / [secure] / [secure]; "), line
    if name == "github-actions":  # the signed URL's query too
        line = explained(source, IdTokenError("at /t?sig=0123456789abcdef01")).message
        assert "0123456789abcdef01" not in line, line


def test_the_aws_container_token_read_from_its_file_is_taken_out_of_the_failure(tmp_path: Path) -> None:
    """EKS Pod Identity hands the container endpoint's token in a file: quoted back by an endpoint,
    the file's token (its trailing line break dropped, as it is sent) shows as [secure]."""
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text("eks+container/token-0123456789\n")
    env = {"AWS_REGION": "eu-west-1", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file)}
    source = SOURCES["aws"].build(SourceInputs(environ=env, audience="https://api.example.test"))
    line = explained(source, IdTokenError("denied eks+container/token-0123456789")).message
    assert line.startswith("denied [secure]; "), line
