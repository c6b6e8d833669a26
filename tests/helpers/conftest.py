"""Shared test machinery for the credential helpers.

Loopback servers run in a background thread with their own event loop, so tests can drive the real
clients (git, skopeo, pip, the helpers themselves) as blocking subprocesses while the servers answer.
One ``tokenrelay run`` sidecar, started once per session, serves every server's audience.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.lite.socketclient import LocalApiError, fetch_token
from tokenrelay.testing import FakeTokenService, ThreadedServer, make_jwt

from ..support.helpers import (
    BIN,
    IDENTITY,
    Stack,
    TokenCheck,
    git_app,
    index_app,
    registry_app,
    script,
)
from ..support.paths import short_dir
from ..support.waiting import eventually_blocking


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    service = FakeTokenService()
    token_server = ThreadedServer(service.app()).start()
    checks = [TokenCheck(service) for _ in range(3)]
    git = ThreadedServer(git_app(checks[0])).start()
    registry = ThreadedServer(registry_app(checks[1])).start()
    index = ThreadedServer(index_app(checks[2])).start()
    for check, server in zip(checks, (git, registry, index), strict=True):
        check.audience = server.netloc
    workdir = str(short_dir("trh-"))
    socket = f"{workdir}/s.sock"
    env = {
        **os.environ,
        "OIDC_TOKEN": make_jwt({"sub": "builder", "exp": int(time.time()) + 86400}),
    }
    sidecar = subprocess.Popen(
        [
            script("tokenrelay"),
            "run",
            f"--auth-url={token_server.url}",
            "--api-url=https://api.example.test",
            f"--identity={IDENTITY}",
            f"--audience={git.netloc}",
            f"--audience={registry.netloc}",
            f"--audience={index.netloc}",
            "--id-token-env=OIDC_TOKEN",
            f"--socket={socket}",
            "--log-level=warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def ready() -> bool:
        if sidecar.poll() is not None:
            raise RuntimeError(f"tokenrelay run exited with {sidecar.returncode}")
        try:
            for server in (git, registry, index):
                fetch_token(socket, server.netloc, timeout=1.0)
        except LocalApiError:
            return False
        return True

    try:
        eventually_blocking(ready, "the sidecar's first tokens")
        yield Stack(
            service, token_server, git, checks[0], registry, checks[1], index, checks[2], socket, sidecar
        )
    finally:
        sidecar.terminate()
        sidecar.wait(10)
        for server in (git, registry, index, token_server):
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def client_env(stack: Stack, tmp_path: Path) -> dict[str, str]:
    """Environment for a real client: private HOME and XDG dirs, the helpers on PATH, the sidecar's socket."""
    home = tmp_path / "home"
    for sub in ("", ".docker", ".config", ".cache", "run"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    (home / "run").chmod(0o700)
    keep = {"LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SYSTEMROOT"}
    env = {key: value for key, value in os.environ.items() if key in keep}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_RUNTIME_DIR": str(home / "run"),
            "DOCKER_CONFIG": str(home / ".docker"),
            "TOKENRELAY_SOCKET": stack.socket,
            "TOKENRELAY_HOSTS": stack.hosts,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
    )
    return env
