"""``tokenrelay doctor`` checks each --render: present, fresh, an entry for each host whose audience
the sidecar keeps."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tokenrelay.testing import make_jwt

from ..support.helpers import IDENTITY, script
from ..support.render import AUDIENCE, RenderStack

pytestmark = pytest.mark.e2e


def doctor(stack: RenderStack, *renders: str) -> dict[str, dict[str, Any]]:
    """The render checks of ``tokenrelay doctor --json`` run with the stack sidecar's settings."""
    env = {**os.environ, "OIDC_TOKEN": make_jwt({"sub": "builder", "exp": int(time.time()) + 3600})}
    argv = [
        script("tokenrelay"),
        "doctor",
        "--json",
        f"--auth-url={stack.token_url}",
        "--api-url=https://api.example.test",
        f"--identity={IDENTITY}",
        f"--audience={AUDIENCE}",
        "--id-token-env=OIDC_TOKEN",
        f"--socket={stack.socket}",
        f"--hosts={stack.hosts}",
        f"--render-maven-ids={stack.servers['maven'].netloc}=loopback-repo",
        *(f"--render={spec}" for spec in renders),
    ]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=60)
    checks = json.loads(result.stdout)["checks"]
    return {check["id"]: check for check in checks if check["group"] == "renders"}


def test_the_doctor_passes_the_stacks_renders(render_stack: RenderStack) -> None:
    """Every file the running sidecar renders is present and holds its current token for every host."""
    specs = [f"{name}={path}" for name, path in render_stack.paths.items() if name != "template"]
    found = doctor(render_stack, *specs)
    assert {check["status"] for check in found.values()} == {"passed"}, found
    assert len(found) == len(specs)


def test_the_doctor_fails_a_stale_or_missing_render(render_stack: RenderStack, tmp_path: Path) -> None:
    """A netrc whose token has expired (its sidecar stopped writing it) fails, naming the expiry; a
    render that is not there while the sidecar runs fails, with the fix."""
    stale = tmp_path / "netrc"
    old = make_jwt({"aud": AUDIENCE, "exp": int(time.time()) - 60})
    stale.write_text(
        "# >>> tokenrelay: entries below are rewritten at every refresh >>>\n"
        f"machine 127.0.0.1 login _token password {old}\n# <<< tokenrelay <<<\n"
    )
    found = doctor(render_stack, f"netrc={stale}", f"npmrc={tmp_path / 'missing'}")
    expired = found[f"renders.{stale}"]
    assert expired["status"] == "failed"
    assert "the token for 127.0.0.1:" in expired["message"] and "expired at" in expired["message"]
    missing = found[f"renders.{tmp_path / 'missing'}"]
    assert (missing["status"], missing["fix"].startswith("run `tokenrelay run` with --render")) == (
        "failed",
        True,
    )
    assert old not in json.dumps(found)
