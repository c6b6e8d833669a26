"""The ``--configure`` targets on their own: what each writes in the private directory and sets in
the command's environment, from the user's own files, which stay as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenrelay.errors import ConfigError
from tokenrelay.exec.targets import TARGETS, chosen
from tokenrelay.exec.workspace import Workspace
from tokenrelay.helpers.hosts import parse_list
from tokenrelay.sidecar.settings import Settings

HOST = "registry.example.test"


def workspace(tmp_path: Path, **environ: str) -> Workspace:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = Settings(auth_url="http://127.0.0.1:1", api_url="https://api.example.test", identity="i")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", **environ}
    return Workspace(private, env, parse_list([HOST], "test"), settings)


def test_containers_auth_merges_the_chain_and_puts_the_helper_first(tmp_path: Path) -> None:
    """REGISTRY_AUTH_FILE holds the logins of every file podman and skopeo would read (the first file
    winning), without a stored login for a configured host, which goes to the helper instead."""
    runtime = tmp_path / "run"
    (runtime / "containers").mkdir(parents=True)
    first = {"auths": {HOST: {"auth": "c3RhbGU="}, "a.example": {"auth": "Zmlyc3Q="}}}
    (runtime / "containers" / "auth.json").write_text(json.dumps(first))
    config = tmp_path / "home" / ".config" / "containers"
    config.mkdir(parents=True)
    later = {"auths": {"a.example": {"auth": "bGF0ZXI="}, "b.example": {"auth": "Yg=="}}}
    (config / "auth.json").write_text(json.dumps(later))
    space = workspace(tmp_path, XDG_RUNTIME_DIR=str(runtime))
    TARGETS["docker"].apply(space)
    auth = json.loads(Path(space.env["REGISTRY_AUTH_FILE"]).read_text())
    assert auth["auths"] == {"a.example": {"auth": "Zmlyc3Q="}, "b.example": {"auth": "Yg=="}}
    assert auth["credHelpers"] == {HOST: "tokenrelay"}
    assert Path(space.env["REGISTRY_AUTH_FILE"]).is_relative_to(space.private)
    assert json.loads((runtime / "containers" / "auth.json").read_text()) == first


def test_docker_config_directory_entries_are_carried_over(tmp_path: Path) -> None:
    """The private DOCKER_CONFIG still has the user's contexts and CLI plugins, as links."""
    docker = tmp_path / "docker"
    (docker / "contexts").mkdir(parents=True)
    (docker / "config.json").write_text("{}")
    space = workspace(tmp_path, DOCKER_CONFIG=str(docker))
    TARGETS["docker"].apply(space)
    private = Path(space.env["DOCKER_CONFIG"])
    assert (private / "contexts").resolve() == (docker / "contexts").resolve()
    assert json.loads((private / "config.json").read_text())["credHelpers"] == {HOST: "tokenrelay"}
    assert (private / "config.json").stat().st_mode & 0o077 == 0


def test_a_broken_docker_config_names_the_file_and_the_variable(tmp_path: Path) -> None:
    """A config.json that is not JSON fails with one line naming it and DOCKER_CONFIG."""
    docker = tmp_path / "docker"
    docker.mkdir()
    (docker / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"cannot read .*config\.json .*DOCKER_CONFIG"):
        TARGETS["docker"].apply(workspace(tmp_path, DOCKER_CONFIG=str(docker)))


def test_a_bad_git_config_count_is_named(tmp_path: Path) -> None:
    """GIT_CONFIG_COUNT that is not a number fails with one line naming it."""
    with pytest.raises(ConfigError, match="GIT_CONFIG_COUNT is 'two', not a number"):
        TARGETS["git"].apply(workspace(tmp_path, GIT_CONFIG_COUNT="two"))


def test_git_reaches_a_non_loopback_host_over_https_only(tmp_path: Path) -> None:
    """The helper is configured for https:// of a remote host; plain http:// gets no entry."""
    space = workspace(tmp_path)
    TARGETS["git"].apply(space)
    keys = {space.env[f"GIT_CONFIG_KEY_{i}"] for i in range(int(space.env["GIT_CONFIG_COUNT"]))}
    assert keys == {f"credential.https://{HOST}.helper"}


def test_all_is_every_target_once() -> None:
    """``all`` (with or without others) chooses every target of the table, each once."""
    assert [target.name for target in chosen(["all", "git"])] == list(TARGETS)


def test_exec_option_names_agree_with_the_table() -> None:
    """lite.names spells exec's options as its table declares them, and --hosts (run's option, which
    exec shares) is the helpers' own TOKENRELAY_HOSTS."""
    from tokenrelay.exec.options import EXEC_OPTIONS
    from tokenrelay.lite import names
    from tokenrelay.sidecar.settings import OPTIONS_BY_NAME

    assert [option.name for option in EXEC_OPTIONS] == list(names.EXEC_OPTION_NAMES)
    assert OPTIONS_BY_NAME["hosts"].env == names.HOSTS_ENV
