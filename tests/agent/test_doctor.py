"""`tokenrelay doctor` inside a pod in agent mode: it checks the pod's token, the identity, the agent's
socket, and asks the real agent (tests/agent/conftest.py's, on a real API server) for a token."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from .conftest import Cluster

pytestmark = pytest.mark.usefixtures("control_plane")


def doctor(cluster: Cluster, token: str | None, **env: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """`tokenrelay doctor --json` with the variables the injector sets in agent mode."""
    token_file = cluster.directory / "doctor.token"
    token_file.unlink(missing_ok=True)
    if token is not None:
        token_file.write_text(token + "\n")
    variables = {
        "PATH": "/usr/bin:/bin",
        "TOKENRELAY_SOCKET": cluster.socket,
        "TOKENRELAY_AGENT_TOKEN_FILE": str(token_file),
        "TOKENRELAY_IDENTITY": "alice",
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tokenrelay", "doctor", "--json"],
        env=variables,
        capture_output=True,
        text=True,
    )
    assert done.stderr == ""
    if token is not None:
        assert token not in done.stdout
    checks = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks


def test_doctor_passes_in_a_pod_the_agent_serves(cluster: Cluster) -> None:
    """With the pod's own projected token, the doctor's agent lines pass, the last one a token the
    agent really answered, and the settings checks of a sidecar are not run (the pod has none)."""
    cluster.pod("doctor-1", "alpha")
    status, checks = doctor(cluster, cluster.token("doctor-1"))
    agent = {k: c["status"] for k, c in checks.items() if k.startswith("agent.")}
    assert agent == {
        "agent.pod_token": "passed",
        "agent.identity": "passed",
        "agent.socket": "passed",
        "agent.token": "passed",
    }
    assert "pod agent-e2e/doctor-1" in checks["agent.pod_token"]["message"]
    assert not any(k.startswith(("config.", "sidecar.", "service.")) for k in checks)
    assert status == 0


def test_doctor_says_why_the_agent_refuses_and_what_to_do(cluster: Cluster) -> None:
    """A token of the wrong audience: the agent's refusal and the fix naming the annotation and flag."""
    cluster.pod("doctor-2", "alpha")
    status, checks = doctor(cluster, cluster.token("doctor-2", audience="https://elsewhere.example"))
    assert status == 1
    token = checks["agent.token"]
    assert (token["status"], token["details"]["reason"]) == ("failed", "POD_TOKEN_AUDIENCE")
    assert "tokenrelay.dev/oidc-audience" in token["fix"] and "--pod-token-audience" in token["fix"]


def test_doctor_without_the_agent_or_the_token_names_the_fix(cluster: Cluster) -> None:
    """No socket (no agent on the node) and no token file: each line says what to do, and no request
    is tried."""
    status, checks = doctor(cluster, None, TOKENRELAY_SOCKET=str(cluster.directory / "none" / "agent.sock"))
    assert status == 1
    assert checks["agent.pod_token"]["status"] == "failed"
    assert "tokenrelay.dev/status: injected" in checks["agent.pod_token"]["fix"]
    assert checks["agent.socket"]["status"] == "failed"
    assert "kubectl -n tokenrelay-agent get pods" in checks["agent.socket"]["fix"]
    assert checks["agent.token"]["status"] == "skipped"
