"""``--id-token-source auto`` in each platform's environment: the documented order, one log line."""

from __future__ import annotations

import logging
from pathlib import Path

import aiohttp
import pytest

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.platforms.registry import PLATFORMS, mint
from tokenrelay.errors import ConfigError, IdTokenError
from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.tokens.idsources import SOURCES, SourceInputs, explained
from tokenrelay.tokens.idsources.auto import ORDER, AutoSource

from ..support.platforms import environment

CLOSED = "127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


def auto(env: dict[str, str], http: aiohttp.ClientSession, audience: str, tmp_path: Path) -> AutoSource:
    # no metadata server of the other cloud answers; the --id-token-file default is not there
    env = {"GCE_METADATA_HOST": CLOSED, "AZURE_POD_IDENTITY_AUTHORITY_HOST": f"http://{CLOSED}", **env}
    inputs = SourceInputs(
        environ=env,
        audience=audience,
        session=http,
        id_token_file=str(tmp_path / "none"),
        connect_timeout=0.5,
    )
    source = SOURCES["auto"].build(inputs)
    assert isinstance(source, AutoSource)
    return source


@pytest.mark.parametrize("name", [name for name in ORDER if name in PLATFORMS])
async def test_auto_finds_each_platform_and_says_why_in_one_line(
    name: str,
    emulator: Emulator,
    http: aiohttp.ClientSession,
    bin_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """In each platform's environment auto reads that platform's token and logs its choice once."""
    caplog.set_level(logging.INFO, "tokenrelay")
    source = auto(environment(name, emulator, bin_dir), http, emulator.base_url, tmp_path)
    token = await source.read()
    await source.read()
    claims = unverified_claims(token.value)
    assert claims is not None and claims["iss"] == PLATFORMS[name].issuer
    assert source.chosen is not None and source.chosen.name == name
    chosen = [r.getMessage() for r in caplog.records if r.getMessage().startswith("auto chose")]
    assert chosen == [f"auto chose the {name} OIDC token source: {source.why}"]
    assert "(auto: " in source.description


async def test_a_workload_identity_file_comes_before_a_ci_system(
    emulator: Emulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """AZURE_FEDERATED_TOKEN_FILE wins over GitHub Actions' markers: token files come first."""
    federated = tmp_path / "azure-identity-token"
    federated.write_text(mint(emulator.issuer, "azure", emulator.base_url))
    env = {**environment("github-actions", emulator), "AZURE_FEDERATED_TOKEN_FILE": str(federated)}
    source = auto(env, http, emulator.base_url, tmp_path)
    assert source.chosen is not None and source.chosen.description == f"file {federated}"
    assert source.why == "AZURE_FEDERATED_TOKEN_FILE is set (Azure workload identity)"


async def test_nothing_found_is_one_error_naming_every_step(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """With no file, no CI markers and no metadata server, auto says what it tried and the flag to set."""
    source = auto({}, http, "https://auth.example", tmp_path)
    with pytest.raises(IdTokenError) as nothing:
        await source.read()
    message = str(nothing.value)
    assert message.startswith("--id-token-source auto found no OIDC token: no token file")
    assert "azure: cannot reach Azure's instance metadata service" in message
    assert "gcp: cannot reach the GCP metadata server" in message
    assert explained(source, nothing.value).message.endswith(
        "; choose the platform's source with --id-token-source (see docs/platforms/)"
    )


async def test_silent_metadata_servers_cost_a_bounded_wait(
    http: aiohttp.ClientSession, silent_port: int, tmp_path: Path
) -> None:
    """Metadata servers that accept and never answer end auto's search within its bounds, in one line."""
    silent = f"127.0.0.1:{silent_port}"
    env = {"GCE_METADATA_HOST": silent, "AZURE_POD_IDENTITY_AUTHORITY_HOST": f"http://{silent}"}
    inputs = SourceInputs(
        environ=env, audience="https://a.example", session=http, timeout=0.3, id_token_file="/no"
    )
    with pytest.raises(IdTokenError) as silence:
        await SOURCES["auto"].build(inputs).read()
    assert str(silence.value).count("did not answer") == 2 and "\n" not in str(silence.value)


def test_a_platform_found_without_its_inputs_is_refused_at_start(tmp_path: Path) -> None:
    """Azure Pipelines' markers without a service connection: auto fails at start naming the flag."""
    env = {"TF_BUILD": "True", "SYSTEM_OIDCREQUESTURI": "http://x", "SYSTEM_ACCESSTOKEN": "t"}
    with pytest.raises(ConfigError, match="--azure-service-connection-id"):
        SOURCES["auto"].build(SourceInputs(environ=env, audience="a", id_token_file=str(tmp_path / "none")))


async def test_a_ci_variable_that_expires_before_the_job_ends_warns_once(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A GitLab token that dies before the job's timeout is warned about once, without the token."""
    import time
    from datetime import UTC, datetime

    caplog.set_level(logging.WARNING, "tokenrelay")
    token = mint(emulator.issuer, "gitlab", emulator.base_url, 900)
    env = {
        "TOKENRELAY_ID_TOKEN": token,
        "CI_JOB_TIMEOUT": "10800",
        "CI_JOB_STARTED_AT": datetime.fromtimestamp(time.time(), UTC).isoformat(),
    }
    source = SOURCES["gitlab"].build(SourceInputs(environ=env, audience="a"))
    await source.read()
    await source.read()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "before the job is likely to end" in warnings[0] and "cannot mint another" in warnings[0]
    assert token not in warnings[0]
    env["CI_JOB_TIMEOUT"] = "600"
    quiet = SOURCES["gitlab"].build(SourceInputs(environ=env, audience="a"))
    caplog.clear()
    await quiet.read()
    assert [r for r in caplog.records if r.levelno == logging.WARNING] == []
