"""The doctor's OIDC checks for every source: what was chosen and why, the claims, and a token that
cannot outlive the job."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenrelay.doctor.report import Outcome
from tokenrelay.emulator.platforms.registry import PLATFORMS, mint
from tokenrelay.tokens.idsources import SOURCES

from ..support.doctor import Platform, doctor, finding
from ..support.platforms import environment, write_stand_ins

CLOSED = "http://127.0.0.1:9"


async def test_auto_on_gcp_shows_the_choice_the_claims_and_the_claim_match_to_set(
    platform: Platform, environ: dict[str, str]
) -> None:
    """On a (emulated) GCP machine the doctor says auto chose gcp and why, shows the token's claims,
    and when the identity's claimMatch refuses them, names the exact claimMatch to set."""
    platform.token_file.unlink()
    environ.update(
        {
            "GCE_METADATA_HOST": platform.url.removeprefix("http://"),
            "AZURE_POD_IDENTITY_AUTHORITY_HOST": CLOSED,
        }
    )
    report = await doctor(platform.argv("--id-token-source", "auto"), environ)
    chosen = finding(report, "oidc.source")
    assert chosen.outcome is Outcome.PASSED
    assert chosen.message == (
        "the gcp source (auto: Google Cloud's metadata server answered) mints a new token for "
        f"{platform.url} at every exchange"
    )
    assert "iss=https://accounts.google.com" in finding(report, "oidc.jwt").message
    refused = finding(report, "service.exchange.0")
    assert refused.outcome is Outcome.FAILED
    assert (
        "iss=https://accounts.google.com, sub=109876543210987654321" in refused.message
        and "exp=" in refused.message
    )
    assert refused.fix is not None
    assert '{"issuer": "https://accounts.google.com", "subject": "109876543210987654321"}' in refused.fix
    assert finding(report, "oidc.lifetime").outcome is Outcome.SKIPPED


async def test_a_ci_variable_that_dies_before_the_job_warns(
    platform: Platform, environ: dict[str, str]
) -> None:
    """A GitLab token that expires before the job's end is a warning naming the minting alternative."""
    token = mint(platform.server.emulator.issuer, "gitlab", platform.url, 900)
    platform.tokens.append(token)
    environ.update(
        {
            "GITLAB_CI": "true",
            "TOKENRELAY_ID_TOKEN": token,
            "CI_JOB_TIMEOUT": "10800",
            "CI_JOB_STARTED_AT": datetime.fromtimestamp(time.time(), UTC).isoformat(),
        }
    )
    report = await doctor(platform.argv("--id-token-source", "gitlab"), environ)
    assert finding(report, "oidc.source").message == (
        "the gitlab source (--id-token-source gitlab) hands out the token the platform set once for the job: "
        "exchanges work only while it lives"
    )
    lifetime = finding(report, "oidc.lifetime")
    assert lifetime.outcome is Outcome.WARNING
    assert "before the job is likely to end" in lifetime.message
    assert f"iss={PLATFORMS['gitlab'].issuer}" in finding(report, "oidc.jwt").message
    assert token not in report.text() + report.json()


async def test_a_source_missing_its_platform_says_what_to_set_up(
    platform: Platform, environ: dict[str, str]
) -> None:
    """Azure Pipelines chosen outside a pipeline fails oidc.read naming the variables and the step's env."""
    report = await doctor(platform.argv("--id-token-source", "azure-pipelines"), environ)
    read = finding(report, "oidc.read")
    assert read.outcome is Outcome.FAILED
    assert "SYSTEM_OIDCREQUESTURI and SYSTEM_ACCESSTOKEN" in read.message
    assert read.fix is not None and "$(System.AccessToken)" in read.fix


@pytest.mark.parametrize("name", [name for name in SOURCES if name in PLATFORMS])
async def test_every_platform_source_shows_its_choice_and_claims(
    name: str, platform: Platform, environ: dict[str, str], tmp_path: Path
) -> None:
    """For each platform's source the doctor says which source reads and why, and shows the claims
    (iss, sub, aud, exp) of the token it would present."""
    job = environment(name, platform.server.emulator, write_stand_ins(tmp_path))
    environ.update({**job, "PATH": f"{job['PATH']}{os.pathsep}{environ['PATH']}"})
    report = await doctor(platform.argv("--id-token-source", name), environ)
    chosen = finding(report, "oidc.source")
    assert chosen.outcome is Outcome.PASSED
    assert chosen.message.startswith(f"the {name} source (--id-token-source {name}) ")
    shown = finding(report, "oidc.jwt")
    assert f"iss={PLATFORMS[name].issuer}" in shown.message
    assert {"iss", "sub", "aud", "exp"} <= set(shown.details["claims"])


@pytest.mark.parametrize(("name", "module"), [("aws", "botocore"), ("spiffe", "grpc")])
async def test_a_source_whose_extra_is_not_installed_names_the_pip_command_as_its_fix(
    name: str, module: str, platform: Platform, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """aws without botocore, spiffe without grpcio: oidc.read fails, and its fix is the extra's pip
    command, not the platform's set-up (which cannot help until the package is there)."""
    monkeypatch.setitem(sys.modules, module, None)  # the fault: the module is not installed
    environ.update({"AWS_REGION": "eu-west-1", "SPIFFE_ENDPOINT_SOCKET": "unix:///run/spire/api.sock"})
    report = await doctor(platform.argv("--id-token-source", name), environ)
    read = finding(report, "oidc.read")
    assert read.outcome is Outcome.FAILED
    assert read.message.endswith(f"pip install 'tokenrelay[{name}]'")
    assert read.fix == f"pip install 'tokenrelay[{name}]'"


async def test_a_platform_that_echoes_its_credential_never_gets_it_into_the_report(
    platform: Platform, environ: dict[str, str], aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> None:
    """Azure's identity endpoint quoting back the IDENTITY_HEADER it got: oidc.read fails in the
    platform's words with [secure] in its place, and the report holds the secret nowhere."""

    async def echo(request: web.Request) -> web.Response:
        said = f"refused {request.headers.get('X-IDENTITY-HEADER')}"
        return web.json_response({"message": said}, status=400)

    app = web.Application()
    app.router.add_get("/msi", echo)
    server = await aiohttp_server(app)
    environ.update(
        {"IDENTITY_ENDPOINT": str(server.make_url("/msi")), "IDENTITY_HEADER": "echoed-header-secret"}
    )
    report = await doctor(platform.argv("--id-token-source", "azure"), environ)
    read = finding(report, "oidc.read")
    assert read.outcome is Outcome.FAILED
    assert "answered HTTP 400: refused [secure]" in read.message, read.message
    assert "echoed-header-secret" not in report.text() + report.json()
