"""The local-API client in agent mode, where no agent answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_no_agent_listening_says_what_to_check(tmp_path: Path) -> None:
    """With TOKENRELAY_AGENT_TOKEN_FILE set and nothing at the socket, `tokenrelay token` names the
    agent and TOKENRELAY_SOCKET, not `tokenrelay run`, and never prints the pod's token."""
    token_file = tmp_path / "token"
    token_file.write_text("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJwb2QifQ.c2ln\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "TOKENRELAY_SOCKET": str(tmp_path / "absent.sock"),
        "TOKENRELAY_AGENT_TOKEN_FILE": str(token_file),
        "TOKENRELAY_IDENTITY": "alice",
    }
    done = subprocess.run(
        [sys.executable, "-m", "tokenrelay", "token"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    assert "no tokenrelay agent is listening" in done.stderr
    assert "TOKENRELAY_SOCKET" in done.stderr
    assert "eyJ" not in done.stderr + done.stdout


def test_a_file_that_holds_no_token_is_named(tmp_path: Path) -> None:
    """A token file holding something that is not one token (here: two words) is refused before any
    request, naming the variable."""
    token_file = tmp_path / "token"
    token_file.write_text("not a token\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "TOKENRELAY_SOCKET": str(tmp_path / "absent.sock"),
        "TOKENRELAY_AGENT_TOKEN_FILE": str(token_file),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tokenrelay", "token"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    assert "TOKENRELAY_AGENT_TOKEN_FILE" in done.stderr
    assert "does not hold a service-account token" in done.stderr
