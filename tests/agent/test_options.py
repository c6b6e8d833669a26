"""``tokenrelay agent``'s options: one table behind its flags, variables, errors and reference."""

from __future__ import annotations

import subprocess
import sys

from tokenrelay import docgen
from tokenrelay.agent import cli as agent_cli
from tokenrelay.agent.options import AGENT_OPTIONS, SHARED
from tokenrelay.lite import names

from ..support.kube import REPO

AGENT_DOC = REPO / "docs" / "agent.md"


def test_agent_reference_is_up_to_date() -> None:
    """docs/agent.md's generated table is exactly what the agent's option table gives."""
    assert docgen.main(["--check", str(AGENT_DOC)]) == 0, (
        "run: python -m tokenrelay.docgen --write docs/agent.md"
    )


def test_every_agent_flag_is_documented() -> None:
    """Every flag `tokenrelay agent` accepts is in docs/agent.md's reference, and nothing more."""
    import argparse

    parser = argparse.ArgumentParser()
    agent_cli.add_arguments(parser)
    flags = {s for action in parser._actions for s in action.option_strings if s.startswith("--")}
    flags.discard("--help")
    text = AGENT_DOC.read_text()
    section = text[text.index(docgen.AGENT_BEGIN) : text.index(docgen.AGENT_END)]
    documented = {row.split("`")[1].split()[0] for row in section.splitlines() if row.startswith("| `--")}
    assert documented == flags


def test_names_agree_with_the_agent_table() -> None:
    """lite.names knows the agent's own options (error messages name them through `where`)."""
    own = [option.name for option in AGENT_OPTIONS if option.name not in ("socket", "socket_mode")]
    assert own == list(names.AGENT_OPTION_NAMES)
    assert set(SHARED) <= set(names.OPTION_NAMES)


def _agent(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenrelay", "agent", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_missing_node_name_is_one_line_naming_flag_and_variable() -> None:
    """Without --node-name the agent exits 2 with one line naming the flag and TOKENRELAY_NODE_NAME."""
    done = _agent("--auth-url", "https://auth.example", "--api-url", "https://api.example")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "--node-name (env TOKENRELAY_NODE_NAME) is required" in done.stderr


def test_jwks_file_without_issuer_names_the_fix() -> None:
    """--cluster-jwks-file alone is refused, naming --cluster-issuer."""
    done = _agent(
        "--cluster-jwks-file",
        "/nonexistent",
        TOKENRELAY_NODE_NAME="n",
        TOKENRELAY_AUTH_URL="https://auth.example",
        TOKENRELAY_API_URL="https://api.example",
    )
    assert done.returncode == 2
    assert "--cluster-issuer (env TOKENRELAY_CLUSTER_ISSUER)" in done.stderr
    assert "Traceback" not in done.stderr
