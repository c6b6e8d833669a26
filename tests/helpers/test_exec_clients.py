"""``tokenrelay exec --configure``: the real git, skopeo and pip inside the command use tokenrelay's
helpers against loopback servers that demand ``_token`` and a live token, with tokenrelay's bin off
the command's PATH and nothing written outside the private directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tokenrelay.testing import ThreadedServer

from ..support.execrun import exec_env, run_exec
from ..support.githttp import CONTENT, bare_repository, git_backend_app
from ..support.helpers import GIT_SHA, Stack, TokenCheck, require

pytestmark = pytest.mark.e2e


def home_files(env: dict[str, str]) -> set[str]:
    """Every file under the client's HOME, relative to it."""
    home = Path(env["HOME"])
    return {str(path.relative_to(home)) for path in home.rglob("*") if path.is_file()}


def test_git_ls_remote_with_configure_git(stack: Stack, client_env: dict[str, str]) -> None:
    """git inside the command authenticates with the relay's token through the helper, and a storing
    helper configured in ~/.gitconfig neither answers nor gets the token to store."""
    git = require("git")
    env = exec_env(client_env)
    Path(env["HOME"], ".gitconfig").write_text("[credential]\n\thelper = store\n")
    Path(env["HOME"], ".git-credentials").write_text(f"http://_token:stale@{stack.git.netloc}\n")
    before = home_files(env)
    accepted = len(stack.git_check.accepted)
    result = run_exec(stack, env, "--configure=git", command=[git, "ls-remote", f"{stack.git.url}/demo.git"])
    assert result.returncode == 0, result.stderr
    assert f"{GIT_SHA}\trefs/heads/main" in result.stdout
    assert len(stack.git_check.accepted) > accepted  # a token the server checked as live
    assert Path(env["HOME"], ".git-credentials").read_text() == f"http://_token:stale@{stack.git.netloc}\n"
    assert home_files(env) == before


def test_git_without_configure_is_refused(stack: Stack, client_env: dict[str, str]) -> None:
    """Control: the same exec without --configure git leaves git without credentials."""
    git = require("git")
    env = exec_env(client_env)
    result = run_exec(stack, env, command=[git, "ls-remote", f"{stack.git.url}/demo.git"])
    assert result.returncode != 0


def test_skopeo_inspect_with_configure_docker(stack: Stack, client_env: dict[str, str]) -> None:
    """skopeo inside the command finds docker-credential-tokenrelay through the private
    credHelpers and passes the registry's token flow; the user's docker config is left as it was."""
    skopeo = require("skopeo")
    env = exec_env(client_env)
    theirs = {"auths": {"other.example": {"auth": "dXNlcjpwYXNz"}}, "credHelpers": {}}
    Path(env["DOCKER_CONFIG"], "config.json").write_text(json.dumps(theirs))
    before = home_files(env)
    accepted = len(stack.registry_check.accepted)
    argv = [skopeo, "inspect", "--tls-verify=false", f"docker://{stack.registry.netloc}/demo/app:v1"]
    result = run_exec(stack, env, "--configure=docker", command=argv)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["RepoTags"] == ["v1"]
    assert len(stack.registry_check.accepted) > accepted
    assert json.loads(Path(env["DOCKER_CONFIG"], "config.json").read_text()) == theirs
    assert home_files(env) == before


def test_private_docker_config_keeps_the_users_other_logins(stack: Stack, client_env: dict[str, str]) -> None:
    """The private DOCKER_CONFIG is the user's with credHelpers for the hosts: other registries keep
    their logins, a stored login for a configured host makes way for the helper."""
    env = exec_env(client_env)
    host = stack.registry.netloc
    theirs = {"auths": {"other.example": {"auth": "b3RoZXI="}, host: {"auth": "c3RhbGU="}}, "psFormat": "x"}
    Path(env["DOCKER_CONFIG"], "config.json").write_text(json.dumps(theirs))
    result = run_exec(
        stack, env, "--configure=docker", command=["sh", "-c", 'cat "$DOCKER_CONFIG/config.json"']
    )
    assert result.returncode == 0, result.stderr
    private = json.loads(result.stdout)
    assert private["auths"] == {"other.example": {"auth": "b3RoZXI="}}
    assert private["credHelpers"][host] == "tokenrelay"
    assert private["psFormat"] == "x"


def test_pip_download_with_configure_pip(stack: Stack, client_env: dict[str, str], tmp_path: Path) -> None:
    """pip inside the command (tokenrelay's own environment's) gets ``_token`` and the token from the
    keyring backend, from an index URL with no credentials in it."""
    _pip_download_through_exec(stack, client_env, tmp_path, f"--index-url={stack.index.url}/simple/")


def test_configure_all_sets_up_every_target(stack: Stack, client_env: dict[str, str]) -> None:
    """``--configure all`` is docker, git, pip, npm, maven and netrc at once. (One audience for the
    three loopback hosts: a netrc names machines without their port.)"""
    env = exec_env(client_env)
    hosts = ",".join(f"{server.netloc}=loopback.test" for server in (stack.git, stack.registry, stack.index))
    names = (
        "DOCKER_CONFIG",
        "GIT_CONFIG_COUNT",
        "PIP_KEYRING_PROVIDER",
        "NPM_CONFIG_USERCONFIG",
        "MAVEN_ARGS",
        "NETRC",
    )
    show = 'echo "' + "|".join(f"${name}" for name in names) + '"'
    result = run_exec(stack, env, "--configure=all", f"--hosts={hosts}", command=["sh", "-c", show])
    assert result.returncode == 0, result.stderr
    docker, count, provider, npmrc, maven, netrc = result.stdout.strip().split("|")
    assert docker.endswith("/docker")
    assert int(count) == 2 * 2 * 3  # three loopback hosts, https and http, the reset and the helper
    assert provider == "import"
    assert (npmrc.endswith("/npm/npmrc"), netrc.endswith("/netrc")) == (True, True)
    assert maven.startswith("-s /") and maven.endswith("/maven/settings.xml")


def test_configure_without_hosts_is_125(stack: Stack, client_env: dict[str, str]) -> None:
    """--configure with no hosts to set up says where to give them."""
    env = exec_env(client_env)
    env.pop("TOKENRELAY_HOSTS")
    result = run_exec(stack, env, "--configure=git", command=["true"])
    assert result.returncode == 125
    assert result.stderr == (
        "tokenrelay exec: --configure (env TOKENRELAY_CONFIGURE) needs the hosts to set up: "
        "give --hosts (env TOKENRELAY_HOSTS)\n"
    )


def test_pip_subprocess_provider_finds_the_linked_keyring(
    stack: Stack, client_env: dict[str, str], tmp_path: Path
) -> None:
    """With ``--keyring-provider subprocess`` (what a pip of another environment would use) and the
    user in the index URL, pip runs the ``keyring`` command --configure pip put on the command's PATH."""
    _pip_download_through_exec(
        stack,
        client_env,
        tmp_path,
        "--keyring-provider=subprocess",
        f"--index-url=http://_token@{stack.index.netloc}/simple/",
    )


def _pip_download_through_exec(
    stack: Stack, client_env: dict[str, str], tmp_path: Path, *pip_flags: str
) -> None:
    """``pip download tinypkg`` with ``pip_flags`` under ``exec --configure=pip``: it succeeds, and the
    index accepted a token."""
    env = exec_env(client_env)
    accepted = len(stack.index_check.accepted)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-cache-dir",
        *pip_flags,
        f"--dest={tmp_path / 'dl'}",
        "tinypkg==1.0",
    ]
    result = run_exec(stack, env, "--configure=pip", command=argv, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "dl" / "tinypkg-1.0-py3-none-any.whl").exists()
    assert len(stack.index_check.accepted) > accepted


def test_git_clone_from_a_real_git_http_backend(
    stack: Stack, client_env: dict[str, str], tmp_path: Path
) -> None:
    """``git clone`` inside the command, from ``git http-backend`` behind the token check, through the
    helper that --configure git set up; the clone has the repository's file."""
    git = require("git")
    check = TokenCheck(stack.service)
    server = ThreadedServer(
        git_backend_app(check, bare_repository(tmp_path / "srv", git).parent, git)
    ).start()
    check.audience = server.netloc
    try:
        env = exec_env(client_env)
        dest = tmp_path / "clone"
        argv = [git, "clone", "-q", f"{server.url}/demo.git", str(dest)]
        result = run_exec(stack, env, f"--hosts={server.netloc}", "--configure=git", command=argv)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert (dest / "README").read_text() == CONTENT
    assert check.accepted
    assert check.refused <= 1  # git's first request goes without credentials, to learn it needs some
