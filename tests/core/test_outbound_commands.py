"""``tokenrelay dev``, ``run`` and ``exec`` as a user with a ``.netrc`` runs them: an entry for the
token service's host (127.0.0.1, as on many laptops) and a ``default`` one, in ``~/.netrc`` or the
file ``NETRC`` names, stop no exchange."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.testing import FakeTokenService, ThreadedServer, make_jwt

from ..emulator.test_commands import TOKENRELAY, running
from ..support.execrun import exec_argv
from ..support.helpers import IDENTITY
from ..support.paths import short_dir
from ..support.waiting import eventually_blocking

pytestmark = pytest.mark.e2e

NETRC = "machine 127.0.0.1 login me password from-a-file\ndefault login anyone password from-a-file\n"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


@pytest.fixture(scope="module")
def token_service() -> Iterator[ThreadedServer]:
    server = ThreadedServer(FakeTokenService().app()).start()
    yield server
    server.stop()


@pytest.fixture(params=["home", "NETRC"])
def netrc_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment of a user whose ``~/.netrc``, or the file ``NETRC`` names, holds NETRC."""
    where = short_dir("trn-")
    home = where / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES and k != "NETRC"}
    env["HOME"] = str(home)
    if request.param == "home":
        (home / ".netrc").write_text(NETRC)
    else:
        (where / "netrc").write_text(NETRC)
        env["NETRC"] = str(where / "netrc")
    yield env
    shutil.rmtree(where, ignore_errors=True)


def token_at(socket: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOKENRELAY, "token", "--socket", socket], env=env, capture_output=True, text=True, timeout=60
    )


async def test_dev_holds_a_token(netrc_env: dict[str, str]) -> None:
    """tokenrelay dev, then tokenrelay token at its socket: a token, not an internal error."""
    async with running("dev", "--proxy-listen", "127.0.0.1:0", until="ready", env=netrc_env) as (_, found):
        got = token_at(found["socket"][0], netrc_env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("eyJ")


def test_run_holds_a_token(token_service: ThreadedServer, netrc_env: dict[str, str]) -> None:
    """tokenrelay run against a token service on 127.0.0.1 serves a token on its socket."""
    socket = str(Path(netrc_env["HOME"]) / "s.sock")
    env = {**netrc_env, "OIDC_TOKEN": make_jwt({"sub": "builder", "exp": int(time.time()) + 3600})}
    argv = [
        TOKENRELAY,
        "run",
        f"--auth-url={token_service.url}",
        "--api-url=https://api.example.test",
        f"--identity={IDENTITY}",
        "--id-token-env=OIDC_TOKEN",
        f"--socket={socket}",
        "--log-level=warning",
    ]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        eventually_blocking(lambda: Path(socket).exists(), "the socket")
        got = token_at(socket, env)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=20)
    assert got.returncode == 0, (got.stderr, stderr)


def test_exec_runs_its_command_with_a_token(token_service: ThreadedServer, netrc_env: dict[str, str]) -> None:
    """tokenrelay exec runs the command, with the token in --export-token's variable, and exits with
    the command's status (not 125, the relay's failure to start)."""
    env = {**netrc_env, "OIDC_TOKEN": make_jwt({"sub": "builder", "exp": int(time.time()) + 3600})}
    argv = exec_argv(
        token_service.url,
        "--export-token=TOKEN",
        command=["sh", "-c", 'case "$TOKEN" in eyJ*) exit 7;; esac'],
    )
    got = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert got.returncode == 7, got.stderr
