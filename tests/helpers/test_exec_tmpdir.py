"""``tokenrelay exec`` under a $TMPDIR of every length around a Unix socket's limit: its private
directory stays under $TMPDIR whenever the socket, bound through its staging name, fits there, and
goes to /tmp otherwise; a socket path with no room says which setting to change."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.testing import FakeTokenService, ThreadedServer, make_jwt

from ..support.execrun import SYSTEM_PATH, exec_argv
from ..support.helpers import IDENTITY, script
from ..support.paths import short_dir

pytestmark = pytest.mark.e2e

# exec's directory (tokenrelay-exec- and 8 characters), then the staging directory bind makes beside
# the socket (.tokenrelay- and 8 characters) holding "s": the longest path bound, 48 bytes past $TMPDIR.
LONGEST_PAST_TMPDIR = len("/tokenrelay-exec-12345678/.tokenrelay-12345678/s")
MAX_PATH_BYTES = 107  # Linux's sun_path: 108 bytes, the terminating NUL among them
SHOW = 'echo "$TOKENRELAY_SOCKET"; tokenrelay token >/dev/null'


@pytest.fixture(scope="module")
def token_service() -> Iterator[ThreadedServer]:
    server = ThreadedServer(FakeTokenService().app()).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    where = short_dir("trt-")
    yield where
    shutil.rmtree(where, ignore_errors=True)


def tmpdir_of(base: Path, length: int) -> Path:
    """A directory whose path is ``length`` characters long."""
    path = base / ("d" * (length - len(str(base)) - 1))
    path.mkdir(exist_ok=True)
    assert len(str(path)) == length
    return path


def environment(**extra: str) -> dict[str, str]:
    oidc = make_jwt({"sub": "builder", "exp": int(time.time()) + 3600})
    return {"HOME": os.environ.get("HOME", "/root"), "PATH": SYSTEM_PATH, "OIDC_TOKEN": oidc, **extra}


@pytest.mark.parametrize("length", range(50, 109))
def test_exec_serves_under_any_tmpdir(token_service: ThreadedServer, base: Path, length: int) -> None:
    """With a TMPDIR of LENGTH characters, exec runs the command with a token on its socket: under
    TMPDIR when everything it binds fits in a socket's path, under /tmp past that, never refused."""
    tmpdir = tmpdir_of(base, length)
    argv = exec_argv(token_service.url, command=["sh", "-c", SHOW])
    result = subprocess.run(
        argv, env=environment(TMPDIR=str(tmpdir)), capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    where = Path(result.stdout.strip()).parent.parent
    fits = length + LONGEST_PAST_TMPDIR <= MAX_PATH_BYTES
    assert where == (tmpdir if fits else Path("/tmp")), result.stdout
    assert [p for p in tmpdir.iterdir() if p.name.startswith("tokenrelay-exec-")] == []


def test_a_socket_path_with_no_room_for_its_staging_name_names_the_flag(
    token_service: ThreadedServer, base: Path
) -> None:
    """tokenrelay run --socket with a path that fits a socket but not the staging name bind makes
    beside it fails at once with a line naming --socket and the byte limit, no traceback."""
    socket = tmpdir_of(base, MAX_PATH_BYTES - len("/s.sock") - 2) / "s.sock"
    argv = [
        script("tokenrelay"),
        "run",
        f"--auth-url={token_service.url}",
        "--api-url=https://api.example.test",
        f"--identity={IDENTITY}",
        "--id-token-env=OIDC_TOKEN",
        f"--socket={socket}",
    ]
    result = subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "--socket (env TOKENRELAY_SOCKET)" in result.stderr
    assert "too long for a Unix socket" in result.stderr and f"at most {MAX_PATH_BYTES}" in result.stderr
    assert "Traceback" not in result.stderr
