"""``tokenrelay run --once --id-token-source auto`` as a CI step runs it: the installed console script,
in a platform's environment, against the emulator as both the platform and the token service."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.iam import identities
from tokenrelay.emulator.platforms.registry import PLATFORMS, mint
from tokenrelay.lite.jwtclaims import unverified_claims

from ..support.platforms import environment
from ..support.production import require_tool


@pytest.mark.parametrize("name", ["github-actions", "buildkite"])
async def test_run_once_with_auto_finds_the_platform_and_writes_the_token(
    name: str, emulator: Emulator, bin_dir: Path, tmp_path: Path
) -> None:
    """In a CI job's environment, auto picks that CI system (one log line says why), the identity whose
    claimMatch names the platform's issuer and subject gets its token, and the file is written."""
    url = emulator.base_url
    platform = PLATFORMS[name]
    claims = unverified_claims(mint(emulator.issuer, name, url))
    assert claims is not None
    org = emulator.organization("acme")
    identity = identities.create(
        emulator.resources,
        org.uid,
        {"name": "ci", "claimMatch": {"issuer": platform.issuer, "subject": claims["sub"]}},
    )
    out = tmp_path / "api-token"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    job = environment(name, emulator, bin_dir)
    env |= job | {"PATH": f"{job['PATH']}{os.pathsep}{os.environ['PATH']}"}
    args = ["run", "--once", "--auth-url", url, "--api-url", url, "--identity", identity.uid]
    args += ["--id-token-source", "auto", "--id-token-file", str(tmp_path / "none"), "--token-file", str(out)]
    process = await asyncio.create_subprocess_exec(
        require_tool("tokenrelay"),
        *args,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert f"auto chose the {name} OIDC token source: " in err.decode()
    assert out.read_text().strip()
    assert out.read_text().strip() not in err.decode()
