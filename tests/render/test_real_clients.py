"""End to end: the real tools read the files ``tokenrelay run --render`` keeps (and go the ``go-auth``
protocol, cargo ``tokenrelay token``) against loopback servers that let in only ``_token`` with a live
token, before and after a refresh of 12-second tokens; the user's own entries stay byte for byte."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tokenrelay.lite.redact import fingerprint
from tokenrelay.lite.socketclient import fetch_token
from tokenrelay.render import parse

from ..support.helpers import BIN, require, run
from ..support.render import AUDIENCE, CHILD_POM, GO_MODULE, HELLO, RenderStack

pytestmark = pytest.mark.e2e

# The command itself: go runs GOAUTH's words ("command" in go help goauth is a placeholder).
GOAUTH = "tokenrelay go-auth"
CARGO_PROVIDER = ["cargo:token-from-stdout", "tokenrelay", "token", "--audience"]


def rendered_token(stack: RenderStack, name: str, key: str) -> Callable[[], str | None]:
    """Reads the token the ``name`` render holds for ``key`` (as that file names the host)."""
    path = stack.paths[name]
    render = parse(f"{name}={path}")

    def read() -> str | None:
        return render.format.tokens(path.read_text()).get(key)

    return read


def across_a_refresh(
    stack: RenderStack, read: Callable[[], str | None], use: Callable[[int], None], *, slow: bool = False
) -> None:
    """Run ``use(round)`` now, then again once the sidecar has replaced the token ``read`` gave before
    the first round: both rounds must be let in, the second with none but a newer token. A ``slow``
    tool (a JVM) starts its first round on a fresh token too, so it has the token's whole life."""
    old = read()
    assert old is not None
    if slow:
        old = stack.wait_for_new_token(read, old)
    for round_number in (1, 2):
        if round_number == 2:
            stack.wait_for_new_token(read, old)
        before = len(stack.check.accepted)
        use(round_number)
        accepted = stack.check.accepted[before:]
        assert accepted, "the server let nothing in"
    assert fingerprint(old) not in accepted, "the tool still sent the token from before the refresh"


def assert_user_entries_kept(stack: RenderStack, name: str) -> None:
    """Without tokenrelay's entries, and with the user's own that it set aside, the file is the
    user's, byte for byte."""
    from tokenrelay.render import aside

    path = stack.paths[name]
    render = parse(f"{name}={path}")
    hosts = [server.netloc for server in stack.servers.values()]
    from tokenrelay.helpers.hosts import parse_spec

    owned = [render.format.key(parse_spec(host)) for host in hosts]
    if name == "maven":
        owned = ["loopback-repo", *owned]
    kept = aside.load(path)
    assert render.format.render(path.read_text(), owned, [], kept) == stack.original[str(path)]


def test_curl_reads_the_rendered_netrc(render_stack: RenderStack, tool_env: dict[str, str]) -> None:
    """``curl --netrc-file`` fetches through the rendered ``.netrc`` before and after a refresh."""
    curl = require("curl")
    netrc = render_stack.paths["netrc"]
    url = f"{render_stack.servers['files'].url}/hello.txt"

    def use(round_number: int) -> None:
        result = subprocess.run(
            [curl, "-fsS", "--netrc-file", str(netrc), url], env=tool_env, capture_output=True, check=False
        )
        assert (result.returncode, result.stdout) == (0, HELLO), result.stderr

    across_a_refresh(render_stack, rendered_token(render_stack, "netrc", "127.0.0.1"), use)
    assert_user_entries_kept(render_stack, "netrc")


def test_wget_reads_the_rendered_netrc(render_stack: RenderStack, tool_env: dict[str, str]) -> None:
    """``wget`` finds the token in ``~/.netrc`` (it answers the server's Basic challenge with it)."""
    wget = require("wget")
    url = f"{render_stack.servers['files'].url}/hello.txt"

    def use(round_number: int) -> None:
        result = subprocess.run(
            [wget, "-q", "-O", "-", url], env=tool_env, capture_output=True, check=False, timeout=30
        )
        assert (result.returncode, result.stdout) == (0, HELLO), result.stderr

    across_a_refresh(render_stack, rendered_token(render_stack, "netrc", "127.0.0.1"), use)
    assert_user_entries_kept(render_stack, "netrc")


def test_git_clone_reads_the_rendered_netrc(
    render_stack: RenderStack, tool_env: dict[str, str], tmp_path: Path
) -> None:
    """``git clone`` over HTTP (libcurl reads ``~/.netrc``) with no credential helper configured."""
    git = require("git")
    url = f"{render_stack.servers['files'].url}/repo.git"

    def use(round_number: int) -> None:
        dest = tmp_path / f"clone{round_number}"
        result = run([git, "clone", "-q", url, str(dest)], tool_env)
        assert result.returncode == 0, result.stderr
        log = run([git, "-C", str(dest), "log", "--format=%s"], tool_env)
        assert log.stdout == "first\n"

    across_a_refresh(render_stack, rendered_token(render_stack, "netrc", "127.0.0.1"), use)


def test_pip_download_reads_the_rendered_netrc(
    render_stack: RenderStack, tool_env: dict[str, str], tmp_path: Path
) -> None:
    """``pip download`` from an index behind Basic auth takes ``_token`` and the token from ``~/.netrc``."""
    index = f"{render_stack.servers['files'].url}/simple/"

    def use(round_number: int) -> None:
        dest = tmp_path / f"wheels{round_number}"
        argv = [str(BIN / "python"), "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest)]
        result = run([*argv, "--index-url", index, "tinypkg"], tool_env, timeout=60)
        assert result.returncode == 0, result.stderr
        assert [p.name for p in dest.iterdir()] == ["tinypkg-1.0-py3-none-any.whl"]

    across_a_refresh(render_stack, rendered_token(render_stack, "netrc", "127.0.0.1"), use)


def test_npm_install_reads_the_rendered_npmrc(
    render_stack: RenderStack, tool_env: dict[str, str], tmp_path: Path
) -> None:
    """``npm install`` sends the ``_authToken`` of the rendered ``~/.npmrc`` to the registry."""
    npm = require("npm")
    server = render_stack.servers["npm"]

    def use(round_number: int) -> None:
        project = tmp_path / f"app{round_number}"
        project.mkdir()
        (project / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
        argv = [npm, "install", "--no-audit", "--no-fund", "--no-update-notifier"]
        argv += ["--registry", f"{server.url}/", "--cache", str(tmp_path / f"cache{round_number}")]
        result = subprocess.run(
            [*argv, "tinypkg@1.0.0"], cwd=project, env=tool_env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        installed = json.loads((project / "node_modules/tinypkg/package.json").read_text())
        assert installed["version"] == "1.0.0"

    across_a_refresh(render_stack, rendered_token(render_stack, "npmrc", server.netloc), use)
    assert_user_entries_kept(render_stack, "npmrc")


def test_maven_resolves_through_the_rendered_settings(
    render_stack: RenderStack, tool_env: dict[str, str], tmp_path: Path
) -> None:
    """``mvn`` resolves a parent POM from a repository behind Basic auth with the ``<server>`` the
    render keeps under the id --render-maven-ids gave it, beside the user's own server and mirror."""
    mvn = require("mvn")
    settings = render_stack.paths["maven"]
    project = tmp_path / "project"
    project.mkdir()
    (project / "pom.xml").write_text(CHILD_POM)

    def use(round_number: int) -> None:
        local = tmp_path / f"m2repo{round_number}"  # empty: the parent must come from the server
        argv = [mvn, "-B", "-q", "-s", str(settings), f"-Dmaven.repo.local={local}", "validate"]
        result = subprocess.run(argv, cwd=project, env=tool_env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stdout[-3000:]
        assert (local / "com/example/parent/1.0/parent-1.0.pom").is_file()

    across_a_refresh(render_stack, rendered_token(render_stack, "maven", "loopback-repo"), use, slow=True)
    assert_user_entries_kept(render_stack, "maven")


def test_skopeo_inspect_reads_the_rendered_docker_config(
    render_stack: RenderStack, tool_env: dict[str, str]
) -> None:
    """``skopeo inspect --authfile`` logs in to the registry's token endpoint with the rendered ``auths``."""
    skopeo = require("skopeo")
    config = render_stack.paths["docker-config"]
    server = render_stack.servers["registry"]
    image = f"docker://{server.netloc}/demo/app:v1"

    def use(round_number: int) -> None:
        argv = [skopeo, "inspect", "--authfile", str(config), "--tls-verify=false", "--raw", image]
        result = run(argv, tool_env, timeout=60)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["schemaVersion"] == 2

    across_a_refresh(render_stack, rendered_token(render_stack, "docker-config", server.netloc), use)
    assert_user_entries_kept(render_stack, "docker-config")


def test_curl_reads_a_rendered_template(render_stack: RenderStack, tool_env: dict[str, str]) -> None:
    """A curl config rendered from the user's template sends ``Bearer`` and the current token; the
    template's other ``$`` text stays as written."""
    curl = require("curl")
    rendered = render_stack.paths["template"]
    url = f"{render_stack.servers['npm'].url}/tinypkg"

    def read() -> str | None:
        found = re.search(r"Bearer (\S+)\"", rendered.read_text())
        return found.group(1) if found else None

    def use(round_number: int) -> None:
        result = run([curl, "-fsS", "-K", str(rendered), url], tool_env)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["name"] == "tinypkg"

    across_a_refresh(render_stack, read, use)
    text = rendered.read_text()
    assert f"# curl config for {render_stack.servers['files'].netloc} ({AUDIENCE})" in text
    assert "# $HOME and ${other} stay as they are\n" in text


def test_go_mod_download_through_goauth(
    render_stack: RenderStack, tool_env: dict[str, str], tmp_path: Path
) -> None:
    """``go mod download`` with ``GOAUTH='tokenrelay go-auth'`` fetches from a GOPROXY behind
    Basic auth (HTTPS, as go sends GOAUTH headers on HTTPS only)."""
    go = BIN / "go"
    if not go.exists():
        go = Path(require("go"))
    server = render_stack.servers["goproxy"]
    ca = str(Path(render_stack.socket).parent / "ca.pem")
    env = {
        **tool_env,
        "GOAUTH": GOAUTH,
        "GOPROXY": server.url,
        "GOSUMDB": "off",
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-modcacherw",
        "SSL_CERT_FILE": ca,
        "GOCACHE": str(tmp_path / "gocache"),
    }

    def use(round_number: int) -> None:
        work = tmp_path / f"go{round_number}"
        work.mkdir()
        round_env = {**env, "GOPATH": str(work / "gopath"), "GOMODCACHE": str(work / "modcache")}
        result = subprocess.run(
            [str(go), "mod", "download", "-json", f"{GO_MODULE}@v1.0.0"],
            cwd=work,
            env=round_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["Version"] == "v1.0.0"

    across_a_refresh(render_stack, lambda: fetch_token(render_stack.socket, AUDIENCE).token, use)


CARGO_TOML = """[package]
name = "app"
version = "0.1.0"
edition = "2021"

[dependencies]
tiny = { version = "1.0.0", registry = "relay" }
"""


def cargo() -> str:
    """A cargo that has credential providers (1.74 and later): rustup's before the one on PATH (Debian
    12's is 0.66); skips when there is none."""
    found = [str(Path.home() / ".cargo/bin/cargo"), shutil.which("cargo")]
    versions = []
    for path in (p for p in found if p and Path(p).exists()):
        version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
        minor = re.match(r"cargo 1\.(\d+)", version)
        if minor is not None and int(minor.group(1)) >= 74:
            return path
        versions.append(version.strip() or path)
    if not versions:
        return require("cargo")  # fails under CI, skips elsewhere
    pytest.skip(f"{', '.join(versions)} predates credential providers (cargo 1.74)")


def test_cargo_fetch_through_token_from_stdout(
    render_stack: RenderStack, tool_env: dict[str, str], tmp_path: Path
) -> None:
    """``cargo fetch`` from a sparse registry with ``auth-required`` gets its token from
    ``cargo:token-from-stdout tokenrelay token --audience AUD``, as docs/credential-helpers.md says."""
    binary = cargo()
    rustup = os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup"))  # rustup's toolchains, if any
    server = render_stack.servers["cargo"]
    project = tmp_path / "app"
    (project / "src").mkdir(parents=True)
    (project / "src/lib.rs").write_text("")
    (project / "Cargo.toml").write_text(CARGO_TOML)
    (project / ".cargo").mkdir()
    provider = json.dumps([*CARGO_PROVIDER, AUDIENCE])
    (project / ".cargo/config.toml").write_text(
        f'[registries.relay]\nindex = "sparse+{server.url}/index/"\ncredential-provider = {provider}\n'
    )

    def use(round_number: int) -> None:
        env = {**tool_env, "CARGO_HOME": str(tmp_path / f"cargo{round_number}"), "RUSTUP_HOME": rustup}
        (project / "Cargo.lock").unlink(missing_ok=True)
        result = subprocess.run(
            [binary, "fetch"], cwd=project, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert 'name = "tiny"' in (project / "Cargo.lock").read_text()

    across_a_refresh(render_stack, lambda: fetch_token(render_stack.socket, AUDIENCE).token, use)
