"""End to end: the real clients (git, skopeo, the docker SDK, pip) use the installed helpers against a
running ``tokenrelay run``, and the loopback servers see the sidecar's token."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tokenrelay.lite.redact import fingerprint

from ..support.helpers import GIT_SHA, Stack, docker_config, require, run, script

pytestmark = pytest.mark.e2e


def git_env(client_env: dict[str, str]) -> dict[str, str]:
    """A HOME whose .gitconfig names the helper exactly as the docs tell users to."""
    Path(client_env["HOME"], ".gitconfig").write_text("[credential]\n\thelper = tokenrelay\n")
    return client_env


def test_docker_helper_get_against_the_sidecar(stack: Stack, client_env: dict[str, str]) -> None:
    """``docker-credential-tokenrelay get`` answers with the sidecar's current token for the host."""
    result = run([script("docker-credential-tokenrelay"), "get"], client_env, stack.registry.netloc)
    assert result.returncode == 0, result.stdout
    answer = json.loads(result.stdout)
    assert (answer["ServerURL"], answer["Username"]) == (stack.registry.netloc, "_token")
    assert fingerprint(answer["Secret"]) == stack.current(stack.registry.netloc)
    other = run([script("docker-credential-tokenrelay"), "get"], client_env, "127.0.0.1:1")
    assert (other.returncode, other.stdout) == (1, "credentials not found in native keychain\n")


def test_git_credential_fill(stack: Stack, client_env: dict[str, str]) -> None:
    """``git credential fill`` gets ``_token`` and the sidecar's token from the helper."""
    git = require("git")
    env = git_env(client_env)
    stdin = f"protocol=http\nhost={stack.git.netloc}\npath=demo.git\n\n"
    result = run([git, "credential", "fill"], env, stdin)
    assert result.returncode == 0, result.stderr
    answer = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert answer["username"] == "_token"
    assert fingerprint(answer["password"]) == stack.current(stack.git.netloc)


def test_git_credential_fill_other_host_gets_nothing(stack: Stack, client_env: dict[str, str]) -> None:
    """For a host not configured the helper stays silent and git (prompts off) finds no credential."""
    git = require("git")
    result = run(
        [git, "credential", "fill"], git_env(client_env), "protocol=https\nhost=elsewhere.example\n\n"
    )
    assert result.returncode != 0
    assert "password=" not in result.stdout
    assert "tokenrelay" not in result.stderr


def test_git_ls_remote_authenticates_with_the_token(stack: Stack, client_env: dict[str, str]) -> None:
    """``git ls-remote`` over smart HTTP passes the server's Basic ``_token:<token>`` check."""
    git = require("git")
    accepted = len(stack.git_check.accepted)
    result = run([git, "ls-remote", f"{stack.git.url}/demo.git"], git_env(client_env))
    assert result.returncode == 0, result.stderr
    assert f"{GIT_SHA}\trefs/heads/main" in result.stdout
    assert stack.git_check.accepted[accepted:] == [stack.current(stack.git.netloc)]


def test_git_ls_remote_without_helper_is_refused(stack: Stack, client_env: dict[str, str]) -> None:
    """Control: without the helper the same server refuses git, so the test above proves the helper."""
    git = require("git")
    result = run([git, "ls-remote", f"{stack.git.url}/demo.git"], client_env)
    assert result.returncode != 0


def test_skopeo_login_get_login(stack: Stack, client_env: dict[str, str]) -> None:
    """``skopeo login --get-login`` reports ``_token`` for a host under credHelpers."""
    skopeo = require("skopeo")
    docker_config(client_env, {stack.registry.netloc: "tokenrelay"})
    result = run([skopeo, "login", "--get-login", stack.registry.netloc], client_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "_token"


def test_skopeo_inspect_through_the_registry_token_flow(stack: Stack, client_env: dict[str, str]) -> None:
    """``skopeo inspect`` presents ``_token:<token>`` at the registry's realm and reads the image."""
    skopeo = require("skopeo")
    docker_config(client_env, {stack.registry.netloc: "tokenrelay"})
    accepted = len(stack.registry_check.accepted)
    argv = [skopeo, "inspect", "--tls-verify=false", f"docker://{stack.registry.netloc}/demo/app:v1"]
    result = run(argv, client_env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["RepoTags"] == ["v1"]
    assert stack.registry_check.accepted[accepted:]
    assert set(stack.registry_check.accepted[accepted:]) == {stack.current(stack.registry.netloc)}


def test_skopeo_inspect_without_helper_is_refused(stack: Stack, client_env: dict[str, str]) -> None:
    """Control: with no credential helper the registry refuses skopeo."""
    skopeo = require("skopeo")
    argv = [skopeo, "inspect", "--tls-verify=false", f"docker://{stack.registry.netloc}/demo/app:v1"]
    result = run(argv, client_env, timeout=60)
    assert result.returncode != 0


def test_docker_sdk_resolve_authconfig(
    stack: Stack, client_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docker SDK reads credHelpers, runs the helper and gets ``_token`` and the token."""
    import docker.auth

    for name in ("PATH", "HOME", "DOCKER_CONFIG", "TOKENRELAY_SOCKET", "TOKENRELAY_HOSTS"):
        monkeypatch.setenv(name, client_env[name])
    path = docker_config(client_env, {stack.registry.netloc: "tokenrelay", "elsewhere.example": "tokenrelay"})
    config = docker.auth.load_config(str(path))
    auth = docker.auth.resolve_authconfig(config, stack.registry.netloc)
    assert auth is not None
    assert (auth["ServerAddress"], auth["Username"]) == (stack.registry.netloc, "_token")
    assert fingerprint(auth["Password"]) == stack.current(stack.registry.netloc)
    # not-found is recognised as such (not an error): the SDK carries on without credentials
    assert docker.auth.resolve_authconfig(config, "elsewhere.example") is None


def test_pip_downloads_from_an_index_that_demands_the_token(
    stack: Stack, client_env: dict[str, str], tmp_path: Path
) -> None:
    """pip, with ``--keyring-provider import``, gets ``_token`` and the token from the keyring backend."""
    import sys

    accepted = len(stack.index_check.accepted)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-cache-dir",
        "--keyring-provider=import",
        f"--index-url={stack.index.url}/simple/",
        f"--dest={tmp_path / 'dl'}",
        "tinypkg==1.0",
    ]
    result = run(argv, client_env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "dl" / "tinypkg-1.0-py3-none-any.whl").exists()
    assert set(stack.index_check.accepted[accepted:]) == {stack.current(stack.index.netloc)}


def test_keyring_cli_uses_the_backend(stack: Stack, client_env: dict[str, str]) -> None:
    """``keyring get`` finds the backend through its entry point and prints the token for ``_token``."""
    import sys

    url = f"{stack.index.url}/simple/"
    result = run([sys.executable, "-m", "keyring", "get", url, "_token"], client_env)
    assert result.returncode == 0, result.stderr
    assert fingerprint(result.stdout.strip()) == stack.current(stack.index.netloc)
    other = run([sys.executable, "-m", "keyring", "get", "https://pypi.org/simple/", "_token"], client_env)
    assert other.stdout.strip() == ""


HEAVY = ("aiohttp", "jwt", "http.client", "ssl", "email", "urllib.request", "tomllib", "cryptography")
# What ``json`` drags in (re, enum), and what the code below the helpers once imported: each costs a
# noticeable share of a run that should take little more than the interpreter's own start-up.
DOCKER_GET_AVOIDS = (
    "re",
    "json",
    "enum",
    "socket",
    "urllib",
    "pathlib",
    "ipaddress",
    "dataclasses",
    "typing",
)


def imported_by(argv: list[str], stdin: str, env: dict[str, str]) -> set[str]:
    """The modules a run of ``argv`` imports beyond a bare interpreter's (no site: no .pth imports)."""
    import sys

    import tokenrelay

    bare = env | {"PYTHONPATH": str(Path(tokenrelay.__file__).parents[1])}
    command = [sys.executable, "-S", "-X", "importtime", *argv]
    result = subprocess.run(command, input=stdin, env=bare, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    return {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}


def test_get_path_loads_nothing_heavy(stack: Stack, client_env: dict[str, str]) -> None:
    """A full ``get`` run imports no aiohttp, jwt, http.client, ssl or email: it starts in milliseconds."""
    for helper, stdin in (
        ("docker-credential-tokenrelay", stack.registry.netloc),
        ("git-credential-tokenrelay", f"protocol=http\nhost={stack.git.netloc}\n\n"),
    ):
        loaded = imported_by([script(helper), "get"], stdin, client_env)
        assert "tokenrelay.lite.socketclient" in loaded, helper  # the run did import the helper's modules
        assert not {name for name in loaded if name.split(".")[0] in HEAVY or name in HEAVY}, helper


def test_get_imports_no_json_re_or_enum(stack: Stack, client_env: dict[str, str]) -> None:
    """docker's and git's ``get`` for a served host import none of json, re, enum, socket, typing and
    the like, not even ``__future__`` or tokenrelay's error classes, and decode no JSON: git learns
    the expiry from a header."""
    avoided = {*DOCKER_GET_AVOIDS, "_json", "__future__"}
    for helper, stdin in (
        ("docker-credential-tokenrelay", stack.registry.netloc),
        ("git-credential-tokenrelay", f"protocol=http\nhost={stack.git.netloc}\n\n"),
    ):
        loaded = imported_by([script(helper), "get"], stdin, client_env)
        assert f"tokenrelay.helpers.{helper.split('-')[0]}" in loaded
        decoders = {"tokenrelay.lite.litejson", "tokenrelay.lite.jwtclaims"} & loaded
        assert sorted(name for name in loaded if name.split(".")[0] in avoided) == [], helper
        assert decoders == set(), helper
        assert "tokenrelay.errors" not in loaded, helper  # no error raised, none of their classes built
