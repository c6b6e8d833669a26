"""``tokenrelay exec --configure npm,maven,netrc``: the command's npm, mvn and pip read private copies
of the user's files that exec's own relay renders, before and after a refresh of 12-second tokens; the
user's files are read, never written, and the copies go with the command."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenrelay.testing import make_jwt

from ..support.helpers import BIN, IDENTITY, require, script
from ..support.render import CHILD_POM, RenderStack, UserFiles, maven_settings

pytestmark = pytest.mark.e2e

# Run by exec: each tool once, then again once the relay has replaced the token in the private
# .netrc (the other copies are rewritten in the same step). Prints the private paths it used.
COMMAND = r"""
import os, subprocess, sys, time

def token():
    text = open(os.environ["NETRC"]).read()
    return [line.split()[-1] for line in text.splitlines() if line.startswith("machine 127.0.0.1 ")]

def tools(round):  # the JVM first: it takes longest to send the token it read
    subprocess.run(f"{MVN} -B -q $MAVEN_ARGS -Dmaven.repo.local={WORK}/m2repo{round} validate",
                   shell=True, cwd=f"{WORK}/project", check=True, capture_output=True)
    subprocess.run([NPM, "install", "--no-audit", "--no-fund", "--registry", NPM_URL, "--cache",
                    f"{WORK}/npmcache{round}", "tinypkg@1.0.0"], cwd=f"{WORK}/app{round}", check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", f"{WORK}/wheels{round}",
                    "--index-url", PIP_URL, "tinypkg"], check=True, capture_output=True)

first = token()
tools(1)
deadline = time.monotonic() + 30
while token() == first:
    if time.monotonic() > deadline:
        sys.exit("no refresh within 30 s")
    time.sleep(0.05)
tools(2)
print(os.environ["NPM_CONFIG_USERCONFIG"], os.environ["MAVEN_ARGS"], os.environ["NETRC"])
"""


def test_exec_configures_npm_maven_and_netrc(render_stack: RenderStack, tmp_path: Path) -> None:
    """npm, mvn (``$MAVEN_ARGS``, as Maven before 3.9 needs) and pip (``NETRC``) get through servers
    that want ``_token`` and a live token, twice across a refresh; the user's own files stay as they were."""
    npm, mvn = require("npm"), require("mvn")
    servers = render_stack.servers
    home = tmp_path / "home"
    user = UserFiles(maven=maven_settings(f"{servers['maven'].url}/maven2"))
    files = {home / ".npmrc": user.npmrc, home / ".netrc": user.netrc, home / ".m2/settings.xml": user.maven}
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    work = tmp_path / "work"
    for name in ("app1", "app2", "project"):
        (work / name).mkdir(parents=True)
    for name in ("app1", "app2"):
        (work / name / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
    (work / "project/pom.xml").write_text(CHILD_POM)
    program = tmp_path / "command.py"
    constants = {
        "NPM": npm,
        "MVN": mvn,
        "WORK": str(work),
        "NPM_URL": f"{servers['npm'].url}/",
        "PIP_URL": f"{servers['files'].url}/simple/",
    }
    program.write_text("".join(f"{k} = {v!r}\n" for k, v in constants.items()) + COMMAND)
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "OIDC_TOKEN": make_jwt({"sub": "builder", "exp": int(time.time()) + 3600}),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_CACHE_DIR": "1",
    }
    argv = [
        script("tokenrelay"),
        "exec",
        f"--auth-url={render_stack.token_url}",
        "--api-url=https://api.example.test",
        f"--identity={IDENTITY}",
        "--id-token-env=OIDC_TOKEN",
        "--log-level=warning",
        f"--hosts={render_stack.hosts}",
        f"--render-maven-ids={servers['maven'].netloc}=loopback-repo",
        "--configure=npm,maven,netrc",
        "--",
        sys.executable,
        str(program),
    ]
    accepted = len(render_stack.check.accepted)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    npmrc, _, settings, netrc = result.stdout.split()
    assert (npmrc.endswith("/npm/npmrc"), settings.endswith("/maven/settings.xml")) == (True, True)
    assert not Path(netrc).exists(), "the private copies go with the command"
    assert len(render_stack.check.accepted) - accepted >= 6  # three tools, two rounds, at least one each
    for path, text in files.items():
        assert path.read_text() == text, f"exec wrote {path}"
