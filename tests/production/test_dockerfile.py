"""The container image's recipe: hadolint-clean and shaped for a read-only, non-root runtime."""

from __future__ import annotations

import re
import subprocess

from ..support.production import REPO, require_tool

DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per line, continuations joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def test_hadolint_finds_nothing() -> None:
    """hadolint reports no warning at all on the Dockerfile."""
    hadolint = require_tool("hadolint")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "style", str(DOCKERFILE)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_multi_stage_numeric_non_root_entrypoint() -> None:
    """A builder stage and a runtime stage that copies the venv, runs as a numeric non-root user."""
    steps = instructions()
    froms = [args for word, args in steps if word == "FROM"]
    assert len(froms) == 2
    assert froms[0].endswith("AS builder")
    runtime = steps[[i for i, (word, _) in enumerate(steps) if word == "FROM"][1] :]
    assert ("COPY", "--from=builder /opt/tokenrelay /opt/tokenrelay") in runtime
    (user,) = [args for word, args in runtime if word == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit(), "a numeric uid lets runAsNonRoot verify it"
    assert gid.isdigit()
    assert int(uid) != 0
    assert runtime[-1] == ("ENTRYPOINT", '["tokenrelay", "run"]')
    assert not [word for word, _ in steps if word == "HEALTHCHECK"]
    runtime_env = " ".join(args for word, args in runtime if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in runtime_env
