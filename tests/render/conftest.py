"""One ``tokenrelay run`` for the --render suite, started once per session: short-lived tokens (12 s,
so a refresh every 6 s or so, and a tool that read the file has at least 6 s to use its token), every
loopback server's host in --hosts, and every format rendered into a HOME whose files already hold the
user's own entries."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.testing import FakeTokenService, ThreadedServer, loopback_certificates, make_jwt

from ..support.helpers import BIN, IDENTITY, registry_app, script
from ..support.paths import short_dir
from ..support.render import (
    AUDIENCE,
    LiveCheck,
    RenderStack,
    UserFiles,
    bare_repository,
    cargo_app,
    docker_config,
    files_app,
    goproxy_app,
    maven_app,
    maven_settings,
    npm_app,
)
from ..support.waiting import eventually_blocking

LIFETIME = 12.0


@pytest.fixture(scope="session")
def render_stack() -> Iterator[RenderStack]:
    service = FakeTokenService(lifetime=LIFETIME)
    token_server = ThreadedServer(service.app()).start()
    check = LiveCheck(service, audience=AUDIENCE)
    workdir = short_dir("trr-")
    certificates = loopback_certificates(workdir)
    servers = {
        "files": ThreadedServer(files_app(check, bare_repository(workdir))),
        "npm": ThreadedServer(npm_app(check)),
        "maven": ThreadedServer(maven_app(check)),
        "registry": ThreadedServer(registry_app(check)),
        "goproxy": ThreadedServer(goproxy_app(check), certificates.server_context()),
        "cargo": ThreadedServer(cargo_app(check)),
    }
    for server in servers.values():
        server.start()
    home = workdir / "home"
    user = UserFiles(
        maven=maven_settings(f"{servers['maven'].url}/maven2"),
        docker=docker_config(servers["registry"].netloc),
    )
    files = {
        "netrc": (home / ".netrc", user.netrc),
        "npmrc": (home / ".npmrc", user.npmrc),
        "maven": (home / ".m2" / "settings.xml", user.maven),
        "docker-config": (home / ".docker" / "config.json", user.docker),
    }
    for path, text in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    template = workdir / "curl.tmpl"
    template.write_text(user.template)
    stack = RenderStack(
        service,
        check,
        servers,
        home,
        str(workdir / "s.sock"),
        sidecar=None,  # type: ignore[arg-type]  # started below, once the stack can name its hosts
        token_url=token_server.url,
        original={str(path): text for path, text in files.values()},
        paths={name: path for name, (path, _) in files.items()} | {"template": home / "curl.cfg"},
    )
    env = {**os.environ, "OIDC_TOKEN": make_jwt({"sub": "builder", "exp": int(time.time()) + 86400})}
    argv = [
        script("tokenrelay"),
        "run",
        f"--auth-url={token_server.url}",
        "--api-url=https://api.example.test",
        f"--identity={IDENTITY}",
        f"--audience={AUDIENCE}",
        "--id-token-env=OIDC_TOKEN",
        f"--socket={stack.socket}",
        "--log-level=warning",
        f"--hosts={stack.hosts}",
        f"--render-maven-ids={servers['maven'].netloc}=loopback-repo",
        *(f"--render={name}={path}" for name, (path, _) in files.items()),
        f"--render=template:{template}={stack.paths['template']}",
    ]
    stack.sidecar = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def rendered() -> bool:
        if stack.sidecar.poll() is not None:
            raise RuntimeError(f"tokenrelay run exited with {stack.sidecar.returncode}")
        return all(path.exists() for path in stack.paths.values()) and "tokenrelay" in (
            stack.paths["netrc"].read_text()
        )

    try:
        eventually_blocking(rendered, "the first renders")
        yield stack
    finally:
        stack.sidecar.terminate()
        stack.sidecar.wait(10)
        for server in (*servers.values(), token_server):
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def tool_env(render_stack: RenderStack, tmp_path: Path) -> dict[str, str]:
    """A real client's environment: the stack's HOME (where the renders are), caches of its own."""
    keep = {"LANG", "LC_ALL", "TZ"}
    env = {key: value for key, value in os.environ.items() if key in keep}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(render_stack.home),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "TOKENRELAY_SOCKET": render_stack.socket,
            "TOKENRELAY_HOSTS": render_stack.hosts,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_NO_CACHE_DIR": "1",
        }
    )
    return env
