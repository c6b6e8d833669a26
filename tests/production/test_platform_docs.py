"""docs/platforms/ follows the code: a page per platform source, its doctor lines and subjects the
ones the code and the emulator produce, and auto's documented order the one it uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenrelay.emulator.platforms.registry import PLATFORMS
from tokenrelay.tokens.idsources import SOURCES, SourceInputs
from tokenrelay.tokens.idsources.auto import ORDER

DOCS = Path(__file__).resolve().parents[2] / "docs" / "platforms"
PLATFORM_SOURCES = [name for name in SOURCES if name in PLATFORMS]
# what each platform sets in a job, for building the source the page describes
JOBS = {
    "github-actions": {"ACTIONS_ID_TOKEN_REQUEST_URL": "u", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"},
    "azure-pipelines": {
        "SYSTEM_OIDCREQUESTURI": "u",
        "SYSTEM_ACCESSTOKEN": "t",
        "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID": "0b1c...",
    },
    "aws": {"AWS_REGION": "us-east-1"},
    "spiffe": {"SPIFFE_ENDPOINT_SOCKET": "unix:///run/spire/agent-sockets/api.sock"},
}


@pytest.mark.parametrize("name", PLATFORM_SOURCES)
def test_each_platform_page_shows_what_the_code_and_emulator_say(name: str) -> None:
    """Each page names its flag, quotes the doctor's read line for the source as built, and shows the
    subject the emulator mints for that platform."""
    text = (DOCS / f"{name}.md").read_text()
    assert f"`--id-token-source {name}`" in text
    source = SOURCES[name].build(
        SourceInputs(environ=JOBS.get(name, {}), audience="https://auth.example.com")
    )
    assert f"read the OIDC token from {source.description}" in text
    issuer = re.split(r"[0-9a-f]{8}-", PLATFORMS[name].issuer)[0]  # the page elides uuids
    assert f"iss={issuer}" in text
    shown = re.search(r"sub=(\S+?)(?:\.\.\.|,)", text)
    assert shown is not None
    assert PLATFORMS[name].claims("a")["sub"].startswith(shown.group(1))


def test_the_index_lists_every_source_and_autos_order() -> None:
    """The index has a row per registered source, and auto's numbered steps are ORDER, in order."""
    text = (DOCS / "README.md").read_text()
    rows = re.findall(r"^\| `([a-z-]+)` \|", text, re.MULTILINE)
    assert rows == list(SOURCES)
    steps = re.findall(r"^\d+\. `([a-z-]+)`", text, re.MULTILINE)
    assert steps == list(ORDER)


def test_the_gitlab_pages_offline_lifetime_lines_are_the_doctors() -> None:
    """The GitLab page's offline try shows the doctor's own oidc.lifetime lines: `warn` for the minted
    one-hour token outside a job (no CI_JOB_STARTED_AT or CI_JOB_TIMEOUT: an hour from now assumed),
    and the `ok` of a job once the two are set as the page says."""
    from datetime import UTC, datetime

    from tokenrelay.doctor.oidc import _lifetime

    text = (DOCS / "gitlab.md").read_text()
    # the page's run: a token minted at 18:20:34 for an hour, the doctor's clock a second later
    now = datetime(2026, 11, 28, 18, 20, 35, 113000, UTC).timestamp()
    claims = {"exp": datetime(2026, 11, 28, 19, 20, 34, tzinfo=UTC).timestamp()}
    outside = SOURCES["gitlab"].build(SourceInputs(environ={"TOKENRELAY_ID_TOKEN": "x"}, audience="a"))
    warned = _lifetime(claims, outside, now)
    shown = re.search(r"^warn  oidc\.lifetime: (.*)$", text, re.MULTILINE)
    assert shown is not None and warned.outcome.value == "warning"
    assert shown.group(1) == warned.message
    started = datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    job = {"TOKENRELAY_ID_TOKEN": "x", "CI_JOB_STARTED_AT": started, "CI_JOB_TIMEOUT": "1800"}
    inside = SOURCES["gitlab"].build(SourceInputs(environ=job, audience="a"))
    assert "export CI_JOB_STARTED_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ) CI_JOB_TIMEOUT=1800" in text
    assert f"ok    oidc.lifetime: {_lifetime(claims, inside, now).message}" in text
