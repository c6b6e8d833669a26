"""The doctor's client checks, with real config files for docker, podman and git in a temporary HOME
(and real git reading them)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from tokenrelay.doctor.report import Outcome

from ..support.doctor import BIN, doctor, finding
from ..support.helpers import require

HOST = "registry.example.test"


@pytest.fixture
def hosts(environ: dict[str, str]) -> dict[str, str]:
    return {**environ, "TOKENRELAY_HOSTS": f"{HOST},git.example.test"}


def docker_config(environ: dict[str, str], content: object) -> Path:
    path = Path(environ["HOME"]) / ".docker" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(content))
    return path


async def test_docker_with_our_helper_passes(hosts: dict[str, str]) -> None:
    """credHelpers naming tokenrelay for the host passes for docker and for podman (which reads it too)."""
    docker_config(hosts, {"credHelpers": {HOST: "tokenrelay"}})
    report = await doctor([], hosts)
    assert finding(report, f"clients.docker.{HOST}").outcome is Outcome.PASSED
    assert finding(report, f"clients.podman.{HOST}").outcome is Outcome.PASSED
    assert finding(report, "clients.docker.git.example.test").outcome is Outcome.SKIPPED


async def test_docker_with_another_creds_store_names_the_cred_helpers_fix(hosts: dict[str, str]) -> None:
    """A credsStore of another helper fails for docker, with the exact credHelpers entry that fixes it."""
    path = docker_config(hosts, {"credsStore": "desktop", "auths": {}})
    check = finding(await doctor([], hosts), f"clients.docker.{HOST}")
    assert check.outcome is Outcome.FAILED
    assert "docker-credential-desktop" in check.message
    assert check.fix is not None and f'"credHelpers": {{"{HOST}": "tokenrelay"}} in {path}' in check.fix


async def test_a_stored_podman_login_ahead_of_tokenrelay_names_the_logout(hosts: dict[str, str]) -> None:
    """A podman login stored in $XDG_RUNTIME_DIR/containers/auth.json shadows our credHelpers in
    ~/.docker/config.json: the check fails naming that file and `podman logout --authfile`."""
    docker_config(hosts, {"credHelpers": {HOST: "tokenrelay"}})
    auth = Path(hosts["XDG_RUNTIME_DIR"]) / "containers" / "auth.json"
    auth.parent.mkdir()
    auth.write_text(json.dumps({"auths": {HOST: {"auth": "X3Rva2VuOm9sZA=="}}}))
    report = await doctor([], hosts)
    assert finding(report, f"clients.docker.{HOST}").outcome is Outcome.PASSED
    check = finding(report, f"clients.podman.{HOST}")
    assert check.outcome is Outcome.FAILED
    assert str(auth) in check.message
    assert check.fix is not None and f"podman logout --authfile {auth} {HOST}" in check.fix


async def test_registry_auth_file_is_read_first(hosts: dict[str, str], tmp_path: Path) -> None:
    """REGISTRY_AUTH_FILE replaces the runtime auth file as podman's first, and its helper wins."""
    auth = tmp_path / "ci-auth.json"
    auth.write_text(json.dumps({"credHelpers": {HOST: "ecr-login"}}))
    docker_config(hosts, {"credHelpers": {HOST: "tokenrelay"}})
    check = finding(await doctor([], {**hosts, "REGISTRY_AUTH_FILE": str(auth)}), f"clients.podman.{HOST}")
    assert check.outcome is Outcome.FAILED
    assert "docker-credential-ecr-login" in check.message and str(auth) in check.message


def git(environ: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """Real git in the test's HOME (no loopback server runs in these tests' event loop)."""
    done = subprocess.run(
        [require("git"), *args],
        env=environ,
        input=stdin,
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout


async def test_a_storing_git_helper_is_flagged_and_the_fix_works(hosts: dict[str, str]) -> None:
    """`store` configured for every host alongside tokenrelay fails, and running the exact `git config`
    commands the doctor gives leaves tokenrelay alone in git's list."""
    git(hosts, "config", "--global", "credential.https://git.example.test.helper", "tokenrelay")
    git(hosts, "config", "--global", "credential.https://git.example.test.username", "_token")
    git(hosts, "config", "--global", "credential.helper", "store")
    check = finding(await doctor([], hosts), "clients.git.git.example.test")
    assert check.outcome is Outcome.FAILED
    assert "store" in check.message and "keeps the API token" in check.message
    assert check.fix is not None
    commands = [line.strip() for line in check.fix.splitlines()[1:]]
    assert "git config --global --add credential.https://git.example.test.helper ''" in commands
    for line in commands:
        git(hosts, *shlex.split(line)[1:])
    fixed = finding(await doctor([], hosts), "clients.git.git.example.test")
    assert fixed.outcome is Outcome.PASSED, fixed
    assert fixed.details["helpers"] == ["tokenrelay"]
    kept = git(hosts, "config", "--global", "credential.https://git.example.test.username")
    assert kept.strip() == "_token"


async def test_a_storing_helper_ahead_of_tokenrelay_replays_its_token(hosts: dict[str, str]) -> None:
    """A cache helper before tokenrelay fails as the one that answers first with an expired token."""
    git(hosts, "config", "--global", "credential.helper", "cache --timeout=3600")
    git(hosts, "config", "--global", "--add", "credential.helper", "tokenrelay")
    check = finding(await doctor([], hosts), "clients.git.git.example.test")
    assert check.outcome is Outcome.FAILED
    assert "answers first" in check.message


async def test_git_agrees_with_the_doctor_on_the_order(hosts: dict[str, str], tmp_path: Path) -> None:
    """Real git asks the helpers in the order the doctor reports: with `store` ahead, git hands out the
    stored password, not tokenrelay's."""
    helper = tmp_path / "bin" / "git-credential-tokenrelay"
    helper.parent.mkdir()
    helper.write_text('#!/bin/sh\n[ "$1" = get ] && echo password=from-tokenrelay\nexit 0\n')
    helper.chmod(0o755)
    (Path(hosts["HOME"]) / ".git-credentials").write_text("https://_token:stale-token@git.example.test\n")
    git(hosts, "config", "--global", "credential.helper", "store")
    git(hosts, "config", "--global", "--add", "credential.https://git.example.test.helper", str(helper))
    check = finding(await doctor([], hosts), "clients.git.git.example.test")
    assert check.outcome is Outcome.FAILED and "answers first" in check.message
    filled = git(hosts, "credential", "fill", stdin="protocol=https\nhost=git.example.test\n\n")
    assert "password=stale-token" in filled


async def test_keyring_forced_to_another_backend_names_the_variable(
    hosts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PYTHON_KEYRING_BACKEND forcing another backend fails the keyring check, naming the variable."""
    pytest.importorskip("keyring")
    monkeypatch.setenv("TOKENRELAY_HOSTS", hosts["TOKENRELAY_HOSTS"])
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    check = finding(await doctor([], hosts), "clients.keyring.import")
    assert check.outcome is Outcome.FAILED
    assert check.fix is not None and "PYTHON_KEYRING_BACKEND" in check.fix


async def test_keyring_finds_our_backend(hosts: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With hosts configured, keyring in this environment chooses tokenrelay's backend."""
    pytest.importorskip("keyring")
    monkeypatch.setenv("TOKENRELAY_HOSTS", hosts["TOKENRELAY_HOSTS"])
    monkeypatch.delenv("PYTHON_KEYRING_BACKEND", raising=False)
    assert finding(await doctor([], hosts), "clients.keyring.import").outcome is Outcome.PASSED


async def test_a_malformed_host_list_names_the_variable(environ: dict[str, str]) -> None:
    """A TOKENRELAY_HOSTS entry that is not host[:port][=audience] fails clients.hosts, naming it."""
    check = finding(await doctor([], {**environ, "TOKENRELAY_HOSTS": "https://x/y"}), "clients.hosts")
    assert check.outcome is Outcome.FAILED
    assert "TOKENRELAY_HOSTS" in check.message and check.fix is not None


async def test_registries_conf_helpers_ahead_of_the_auth_files_are_named(hosts: dict[str, str]) -> None:
    """credential-helpers in the user's registries.conf: another helper first warns, and a list without
    the auth files fails, each naming the file; tokenrelay listed there passes."""
    docker_config(hosts, {"credHelpers": {HOST: "tokenrelay"}})
    conf = Path(hosts["HOME"]) / ".config" / "containers" / "registries.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text('credential-helpers = ["secretservice", "containers-auth.json"]\n')
    check = finding(await doctor([], hosts), f"clients.podman.{HOST}")
    assert check.outcome is Outcome.WARNING
    assert "docker-credential-secretservice" in check.message and str(conf) in check.message
    conf.write_text('credential-helpers = ["secretservice"]\n')
    check = finding(await doctor([], hosts), f"clients.podman.{HOST}")
    assert check.outcome is Outcome.FAILED
    assert check.fix is not None and '"containers-auth.json"' in check.fix and str(conf) in check.fix
    conf.write_text('credential-helpers = ["tokenrelay"]\n')
    assert finding(await doctor([], hosts), f"clients.podman.{HOST}").outcome is Outcome.PASSED


async def test_the_podman_verdict_agrees_with_real_skopeo(hosts: dict[str, str], tmp_path: Path) -> None:
    """Real skopeo sends the stored login the doctor flags; after the doctor's own fix (its logout,
    run with real skopeo) it asks tokenrelay, and the doctor passes."""
    fake = tmp_path / "bin" / "docker-credential-tokenrelay"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nread host\necho \'{"Username":"_token","Secret":"from-tokenrelay"}\'\n')
    fake.chmod(0o755)
    env = {**hosts, "PATH": f"{fake.parent}:{hosts['PATH']}"}
    docker_config(env, {"credHelpers": {HOST: "tokenrelay"}})
    auth = Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json"
    auth.parent.mkdir()
    auth.write_text(json.dumps({"auths": {HOST: {"auth": "b2xkdXNlcjpzdGFsZQ=="}}}))  # olduser:stale

    def login() -> str:
        done = subprocess.run(
            [require("skopeo"), "login", "--get-login", HOST],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return done.stdout.strip()

    def run_fix(command: str) -> None:
        # skopeo's logout takes the same arguments as podman's (both containers/image), and CI
        # installs skopeo, not podman.
        argv = shlex.split(command)
        assert argv[0] == "podman"
        subprocess.run([require("skopeo"), *argv[1:]], env=env, check=True, capture_output=True, timeout=60)

    check = finding(await doctor([], env), f"clients.podman.{HOST}")
    assert check.outcome is Outcome.FAILED
    assert login() == "olduser"
    assert check.fix == f"podman logout --authfile {auth} {HOST}"
    run_fix(check.fix)
    assert login() == "_token"
    assert finding(await doctor([], env), f"clients.podman.{HOST}").outcome is Outcome.PASSED


async def test_a_loopback_git_host_over_plain_http_is_found(environ: dict[str, str]) -> None:
    """For a loopback host (where plain http gets a token) git's http:// helper list is the one read."""
    env = {**environ, "TOKENRELAY_HOSTS": "127.0.0.1:8418"}
    git(env, "config", "--global", "credential.http://127.0.0.1:8418.helper", "tokenrelay")
    check = finding(await doctor([], env), "clients.git.127.0.0.1:8418")
    assert check.outcome is Outcome.PASSED
    assert "http://127.0.0.1:8418" in check.message


async def test_a_bug_in_a_check_is_one_failed_line_not_a_traceback(
    hosts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check that crashes becomes one failed line asking for a report; the other groups still run."""
    from tokenrelay.doctor import registries

    def broken(*args: object) -> None:
        raise TypeError("boom")

    monkeypatch.setattr(registries, "docker", broken)
    report = await doctor([], hosts)
    check = finding(report, "clients.internal")
    assert check.outcome is Outcome.FAILED and "TypeError" in check.message
    assert finding(report, "sidecar.socket").outcome is Outcome.FAILED  # the sidecar group ran
    assert report.exit_status() == 1


async def test_our_helper_missing_from_path_is_named(hosts: dict[str, str]) -> None:
    """credHelpers naming tokenrelay while docker-credential-tokenrelay is not on PATH fails, saying so."""
    docker_config(hosts, {"credHelpers": {HOST: "tokenrelay"}})
    check = finding(await doctor([], {**hosts, "PATH": "/usr/bin:/bin"}), f"clients.docker.{HOST}")
    assert check.outcome is Outcome.FAILED
    assert "not on PATH" in check.message and check.fix is not None and "PATH" in check.fix


async def test_the_keyring_command_uv_runs_lists_our_backend(hosts: dict[str, str]) -> None:
    """The keyring command on PATH (this venv's, as uv would run it) lists tokenrelay's backend."""
    assert (BIN / "keyring").exists()  # keyring is a test dependency: its command is in this venv
    check = finding(await doctor([], hosts), "clients.keyring.command")
    assert check.outcome is Outcome.PASSED, check


@pytest.mark.parametrize(
    ("config", "hosts_env", "named"),
    [
        ({"credHelpers": {"other.example.test": "tokenrelay"}}, HOST, "other.example.test"),
        ({"credHelpers": {HOST: "tokenrelay"}}, None, HOST),
        ({"credsStore": "tokenrelay", "auths": {"https://index.docker.io/v1/": {}}}, HOST, "index.docker.io"),
        ({"credsStore": "tokenrelay"}, None, "every registry"),
    ],
    ids=["cred-helpers-unlisted", "hosts-unset", "creds-store-auths", "creds-store-no-hosts"],
)
async def test_a_registry_sent_to_tokenrelay_but_not_listed_fails(
    environ: dict[str, str], config: dict[str, object], hosts_env: str | None, named: str
) -> None:
    """docker's config sends a registry to tokenrelay (credHelpers, or credsStore) that TOKENRELAY_HOSTS
    leaves out, or TOKENRELAY_HOSTS is unset: clients.hosts fails, naming the registry and the fix,
    and the doctor exits 1."""
    env = {**environ, **({"TOKENRELAY_HOSTS": hosts_env} if hosts_env else {})}
    path = docker_config(env, config)
    report = await doctor([], env)
    check = finding(report, "clients.hosts")
    assert check.outcome is Outcome.FAILED, report.text()
    assert str(path) in check.message and named in check.message
    assert check.fix is not None and "TOKENRELAY_HOSTS" in check.fix and "--hosts" in check.fix
    assert report.exit_status() == 1


async def test_a_git_host_sent_to_tokenrelay_but_not_listed_fails(environ: dict[str, str]) -> None:
    """git's credential.<url>.helper = tokenrelay for a host TOKENRELAY_HOSTS leaves out fails
    clients.hosts with `add git.other.test to TOKENRELAY_HOSTS`; once added, it passes."""
    require("git")
    url = "https://git.other.test"
    git(environ, "config", "--global", f"credential.{url}.helper", "tokenrelay")
    env = {**environ, "TOKENRELAY_HOSTS": HOST}
    check = finding(await doctor([], env), "clients.hosts")
    assert check.outcome is Outcome.FAILED
    assert url in check.message and "git" in check.message
    assert check.fix is not None and "add git.other.test to TOKENRELAY_HOSTS" in check.fix
    env["TOKENRELAY_HOSTS"] = f"{HOST},git.other.test"
    assert finding(await doctor([], env), "clients.hosts").outcome is Outcome.PASSED


async def test_registries_sent_to_tokenrelay_and_listed_pass(hosts: dict[str, str]) -> None:
    """Every registry docker sends to tokenrelay is in TOKENRELAY_HOSTS: clients.hosts passes."""
    docker_config(hosts, {"credHelpers": {HOST: "tokenrelay", "elsewhere.test": "desktop"}})
    assert finding(await doctor([], hosts), "clients.hosts").outcome is Outcome.PASSED
