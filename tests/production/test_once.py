"""``tokenrelay run --once`` as a CI step or init container runs it: the installed console script."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from aiohttp import web

from tokenrelay.lite import aip193
from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.lite.redact import fingerprint
from tokenrelay.testing import jti, refusal

from ..support.production import Upstream, free_port, require_tool, run_args

pytestmark = pytest.mark.e2e


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}


def audience_of(token: str) -> str:
    claims = unverified_claims(token)
    assert claims is not None
    return str(claims["aud"])


async def run_once(args: list[str]) -> tuple[int, str]:
    """Run the installed ``tokenrelay`` with ``args``; (exit status, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        require_tool("tokenrelay"),
        *args,
        "--once",
        env=clean_env(),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_once_writes_every_token_file_and_exits_zero(
    upstream: Upstream, id_token_file: Path, tmp_path: Path
) -> None:
    """--once exchanges every audience, writes each --token-file with mode 0600, and exits 0."""
    api_file = tmp_path / "out" / "api-token"
    registry_file = tmp_path / "out" / "registry-token"
    status, err = await run_once(
        run_args(
            upstream,
            id_token_file,
            "--audience",
            "registry.example.test",
            "--token-file",
            str(api_file),
            "--token-file",
            f"{registry_file}=registry.example.test",
        )
    )
    assert status == 0, err
    assert upstream.service.calls == 2
    by_audience = {audience_of(t): t for t in upstream.service.issued}
    assert fingerprint(api_file.read_text()) == fingerprint(by_audience["https://api.example.test"])
    assert fingerprint(registry_file.read_text()) == fingerprint(by_audience["registry.example.test"])
    assert stat.S_IMODE(api_file.stat().st_mode) == 0o600
    for token in upstream.service.issued:
        assert token not in err


async def test_once_refused_exchange_exits_one_with_the_reason(
    upstream: Upstream, id_token_file: Path, tmp_path: Path
) -> None:
    """A refused exchange makes --once exit 1 with one line giving the token service's reason."""

    async def deny(request: web.Request) -> web.Response:
        return refusal(aip193.Code.PERMISSION_DENIED, "identity org/ci does not match subject ci", 403)

    upstream.service.behaviour = deny
    token_file = tmp_path / "api-token"
    status, err = await run_once(run_args(upstream, id_token_file, "--token-file", str(token_file)))
    assert status == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("tokenrelay run --once: ")
    assert "does not match subject ci" in last
    assert not token_file.exists()
    assert upstream.service.calls == 1  # a refusal is not retried: it will not fix itself


async def test_once_rides_out_a_brief_outage(upstream: Upstream, id_token_file: Path, tmp_path: Path) -> None:
    """Two 503s from the token service do not fail a CI step: --once retries within --wait-timeout."""

    async def flaky(request: web.Request) -> web.Response | None:
        if upstream.service.calls <= 2:
            return refusal(aip193.Code.UNAVAILABLE, "restarting", 503)
        return None

    upstream.service.behaviour = flaky
    token_file = tmp_path / "api-token"
    status, err = await run_once(
        run_args(upstream, id_token_file, "--token-file", str(token_file), "--wait-timeout", "20")
    )
    assert status == 0, err
    assert upstream.service.calls == 3
    assert token_file.read_text() == upstream.service.issued[0]


async def test_once_gives_up_on_an_outage_after_the_wait_timeout(
    upstream: Upstream, id_token_file: Path
) -> None:
    """A token service that stays down fails --once within about --wait-timeout, with the reason."""

    async def down(request: web.Request) -> web.Response:
        return refusal(aip193.Code.UNAVAILABLE, "maintenance", 503)

    upstream.service.behaviour = down
    status, err = await run_once(run_args(upstream, id_token_file, "--wait-timeout", "2"))
    assert status == 1
    assert "maintenance" in err.strip().splitlines()[-1]
    assert upstream.service.calls >= 2  # retried (the first backoff is under 1 s) before giving up


async def test_once_without_oidc_token_names_the_flag(upstream: Upstream, tmp_path: Path) -> None:
    """With no OIDC token file, --once exits 1 and says which flag points at it."""
    status, err = await run_once(run_args(upstream, tmp_path / "missing"))
    assert status == 1
    last = err.strip().splitlines()[-1]
    assert "no OIDC token file at" in last
    assert "--id-token-file" in last
    assert upstream.service.calls == 0


async def test_once_unwritable_token_file_exits_one(
    upstream: Upstream, id_token_file: Path, tmp_path: Path
) -> None:
    """A token file that cannot be written makes --once fail, naming the file."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    status, err = await run_once(run_args(upstream, id_token_file, "--token-file", f"{blocker}/token"))
    assert status == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("tokenrelay run --once: cannot write the token file")
    assert str(blocker) in last
    assert jti(upstream.service.issued[0]) == "t1"


async def test_once_reason_is_the_last_line_with_several_audiences(
    upstream: Upstream, id_token_file: Path, tmp_path: Path
) -> None:
    """When one audience fails while another is still exchanging, the reason still ends stderr."""
    refused = asyncio.Event()

    async def split(request: web.Request) -> web.Response | None:
        if request.query["aud"] == "registry.example.test":
            refused.set()
            return refusal(aip193.Code.PERMISSION_DENIED, "registry audience not allowed", 403)
        # A slow answer for the API audience, well after the registry's refusal.
        await refused.wait()
        await asyncio.sleep(0.5)
        return None

    upstream.service.behaviour = split
    status, err = await run_once(run_args(upstream, id_token_file, "--audience", "registry.example.test"))
    assert status == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("tokenrelay run --once: no token for audience registry.example.test")
    assert "registry audience not allowed" in last


async def test_once_names_an_unreachable_token_service_in_the_projects_words(
    upstream: Upstream, id_token_file: Path
) -> None:
    """Nothing listening at --auth-url: the sidecar's log and its last line say "cannot reach ... (connection
    refused): check --auth-url", never aiohttp's "Cannot connect to host ... ssl:default"."""
    url = f"http://127.0.0.1:{free_port()}"
    nowhere = Upstream(upstream.service, url)
    status, err = await run_once(run_args(nowhere, id_token_file, "--wait-timeout", "1"))
    assert status == 1
    assert (
        f"cannot reach the token service at {url}/sts/exchange (connection refused): "
        "check --auth-url (env TOKENRELAY_AUTH_URL)"
    ) in err.strip().splitlines()[-1]
    assert "ssl:default" not in err and "Cannot connect" not in err
