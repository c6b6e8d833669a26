"""A port already taken is a bad setting like any other: one line naming the flag, exit status 2.

Each command runs as a subprocess, as a user starts it, against a loopback port this test holds.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

TOKENRELAY = str(Path(sys.executable).parent / "tokenrelay")
IN_USE = "the address is already in use; stop what listens there or choose another port"


@pytest.fixture(scope="module")
def taken() -> Iterator[str]:
    """``127.0.0.1:PORT`` of a port something else listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield f"127.0.0.1:{holder.getsockname()[1]}"


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOKENRELAY, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "OIDC": "x", "HOME": str(tmp_path)},
    )


def sidecar(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--auth-url=http://127.0.0.1:9",
        "--api-url=http://127.0.0.1:9",
        "--identity=org/identities/x",
        "--id-token-env=OIDC",
        f"--socket={tmp_path}/s.sock",
        *extra,
    ]


@pytest.mark.parametrize(
    ("command", "flag", "prefix"),
    [
        ("run-proxy", "--proxy-listen (env TOKENRELAY_PROXY_LISTEN)", "tokenrelay run"),
        ("run-metrics", "--metrics-listen (env TOKENRELAY_METRICS_LISTEN)", "tokenrelay run"),
        ("dev-proxy", "--proxy-listen", "tokenrelay dev"),
        ("dev-emulator", "--emulator-listen", "tokenrelay dev"),
        ("emulate", "--listen", "tokenrelay emulate"),
    ],
)
def test_a_taken_port_is_one_line_naming_the_flag(
    command: str, flag: str, prefix: str, taken: str, tmp_path: Path
) -> None:
    """Exit 2 with one line naming the flag; nothing announced on stdout, no traceback, no spurious log."""
    args = {
        "run-proxy": sidecar(tmp_path, f"--proxy-listen={taken}"),
        "run-metrics": sidecar(tmp_path, f"--metrics-listen={taken}"),
        "dev-proxy": ["dev", "--proxy-listen", taken],
        "dev-emulator": ["dev", "--proxy-listen", "127.0.0.1:0", "--emulator-listen", taken],
        "emulate": ["emulate", "--listen", taken],
    }[command]
    result = run(args, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""  # tokenrelay dev: no proxy:, try: or stopped line before failing
    assert result.stderr.splitlines()[-1] == f"{prefix}: {flag}: cannot listen on {taken}: {IN_USE}"
    assert "Traceback" not in result.stderr
    assert "exchange failed" not in result.stderr
