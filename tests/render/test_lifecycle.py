"""``tokenrelay run --render`` from start to a clean stop, and ``--once``: the installed command, a
loopback token service, real files."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.testing import FakeTokenService, ThreadedServer, make_jwt

from ..support.helpers import IDENTITY, script
from ..support.paths import short_dir
from ..support.waiting import eventually_blocking

pytestmark = pytest.mark.e2e

USER_NETRC = "# mine\nmachine example.org login me password mine\n"


@pytest.fixture(scope="module")
def token_service() -> Iterator[ThreadedServer]:
    server = ThreadedServer(FakeTokenService().app()).start()
    yield server
    server.stop()


def sidecar(token_service: ThreadedServer, home: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OIDC_TOKEN": make_jwt({"sub": "builder", "exp": int(time.time()) + 3600})}
    argv = [
        script("tokenrelay"),
        "run",
        f"--auth-url={token_service.url}",
        "--api-url=https://api.example.test",
        f"--identity={IDENTITY}",
        "--audience=registry.example.test",
        "--id-token-env=OIDC_TOKEN",
        f"--socket={home}/s.sock",
        "--log-level=warning",
        "--hosts=registry.example.test",
        f"--render=netrc={home}/.netrc",
        f"--render=npmrc={home}/made/.npmrc",
        *extra,
    ]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def home() -> Iterator[Path]:
    where = short_dir("trl-")
    (where / ".netrc").write_text(USER_NETRC)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_a_clean_stop_leaves_no_token_behind(token_service: ThreadedServer, home: Path) -> None:
    """On SIGTERM the sidecar takes its entries out of the user's .netrc (which is theirs again, byte
    for byte) and removes the .npmrc it made, so no expired token waits for the next tool."""
    process = sidecar(token_service, home)
    try:
        eventually_blocking(
            lambda: (home / "made/.npmrc").exists() and "_token" in (home / ".netrc").read_text(),
            "the first renders",
        )
        assert (home / ".netrc").read_text().endswith(USER_NETRC)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert (home / ".netrc").read_text() == USER_NETRC
    assert not (home / "made/.npmrc").exists()


def test_once_writes_the_renders_and_leaves_them(token_service: ThreadedServer, home: Path) -> None:
    """``--once`` (an init container, a CI step) renders every file and exits 0, leaving them for the
    steps after it."""
    process = sidecar(token_service, home, "--once")
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "machine registry.example.test login _token password " in (home / ".netrc").read_text()
    assert "//registry.example.test/:_authToken=" in (home / "made/.npmrc").read_text()


USER_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <servers>
    <server>
      <id>registry.example.test</id>
      <username>me</username>
      <password>my-own-password</password>
    </server>
  </servers>
</settings>
"""
USER_DOCKER = '{\n  "auths": {\n    "registry.example.test": {"auth": "bWU6bXktb3duLXBhc3N3b3Jk"}\n  }\n}\n'


def test_the_users_own_entries_survive_a_crash_and_come_back_at_the_next_clean_stop(
    token_service: ThreadedServer, home: Path
) -> None:
    """The user's own ``<server>`` and ``auths`` entry for a rendered host give way to tokenrelay's
    while it runs; after a SIGKILL the next run keeps them still, and its clean stop gives both
    files back byte for byte."""
    from tokenrelay.render import parse

    settings, config = home / ".m2" / "settings.xml", home / ".docker" / "config.json"
    for path, text in ((settings, USER_SETTINGS), (config, USER_DOCKER)):
        path.parent.mkdir()
        path.write_text(text)
    renders = (f"--render=maven={settings}", f"--render=docker-config={config}")

    def tokens() -> list[str | None]:
        return [
            parse(f"{name}=x").format.tokens(path.read_text()).get("registry.example.test")
            for name, path in (("maven", settings), ("docker-config", config))
        ]

    crashed = sidecar(token_service, home, *renders)
    try:
        eventually_blocking(lambda: None not in tokens(), "the first renders")
    finally:
        crashed.kill()
        crashed.communicate(timeout=20)
    stale = tokens()
    assert "my-own-password" not in settings.read_text()
    process = sidecar(token_service, home, *renders)
    try:
        eventually_blocking(lambda: None not in tokens() and tokens() != stale, "the renders after the crash")
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert settings.read_text() == USER_SETTINGS
    assert config.read_text() == USER_DOCKER
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.xml"]
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.json"]
