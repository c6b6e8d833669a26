"""The image built from the Dockerfile as shipped, run as the manifests run it: read-only root
filesystem, uid 65532, every capability dropped, the socket directory on a tmpfs volume shared with a
second container, against the emulator on the host's loopback."""

from __future__ import annotations

import copy
import json
import re
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from tokenrelay.kube import admission

from ..kube.test_webhook_server import HOST, write_pki
from ..support.image import NO_PYTHON, REPO, Image, RunningEmulator, base_archive, build_on, emulator
from ..support.kube import FIXTURES, INJECTOR, review
from ..support.paths import short_dir
from ..support.production import free_port
from ..support.waiting import eventually_blocking

pytestmark = pytest.mark.e2e

# As deploy/base runs the sidecar: what every container here gets.
HARDENED = [
    "--network=host",
    "--read-only",
    "--user=65532:65532",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
]
PRESENT = """
import importlib
found = []
for name in ("pip", "setuptools", "grpc", "google.protobuf", "google.rpc"):
    try:
        importlib.import_module(name)
        found.append(name)
    except ImportError:
        pass
print(found)
"""
OPERATIONS = (REPO / "docs" / "operations.md").read_text()


@dataclass
class Sidecar:
    image: Image
    emulator: RunningEmulator
    volume: str
    container: str
    metrics: str

    def client(self, entrypoint: str, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> str:
        """``entrypoint`` in a second container of the image, sharing only the socket volume."""
        envs = [f"--env={key}={value}" for key, value in (env or {}).items()]
        result = self.image.engine.docker(
            "run",
            "--rm",
            "--interactive",
            *HARDENED,
            *envs,
            f"--volume={self.volume}:/var/run/tokenrelay",
            f"--entrypoint={entrypoint}",
            self.image.tag,
            *args,
            stdin=stdin,
        )
        return result.stdout


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            code: int = response.status
            return code
    except OSError:
        return 0


@pytest.fixture(scope="module")
def sidecar(image: Image) -> Iterator[Sidecar]:
    with emulator() as upstream:
        tokens = short_dir("tr-oidc-", 0o755)
        (tokens / "oidc-token").write_text(upstream.mint())
        (tokens / "oidc-token").chmod(0o644)
        volume = "tokenrelay-socket"
        image.engine.docker(
            "volume", "create", "--driver=local", "--opt=type=tmpfs", "--opt=device=tmpfs",
            "--opt=o=uid=65532,gid=65532,mode=0700", volume,
        )  # fmt: skip
        metrics = f"127.0.0.1:{free_port()}"
        container = image.engine.docker(
            "run", "--detach", *HARDENED, f"--volume={volume}:/var/run/tokenrelay",
            f"--volume={tokens}:/var/run/secrets/tokens:ro", image.tag,
            "--auth-url", upstream.url, "--api-url", upstream.url, "--identity", upstream.owner,
            "--metrics-listen", metrics,
        ).stdout.strip()  # fmt: skip
        try:
            yield Sidecar(image, upstream, volume, container, f"http://{metrics}")
        finally:
            image.engine.docker("rm", "--force", container, check=False)
            image.engine.docker("volume", "rm", volume, check=False)
            for child in tokens.iterdir():
                child.unlink()
            tokens.rmdir()


def documented(label: str) -> float:
    """The figure docs/operations.md gives as ``**label: N MB**``."""
    found = re.search(rf"\*\*{label}: (\d+(?:\.\d+)?) MB\*\*", OPERATIONS)
    assert found, f"docs/operations.md states no **{label}: N MB**"
    return float(found.group(1))


def test_the_sidecar_serves_a_second_container_through_the_shared_socket(sidecar: Sidecar) -> None:
    """Hardened as in deploy/, the sidecar turns /readyz 200 once it holds a token, and a second container
    sharing only the socket volume gets that token from ``tokenrelay token`` and both credential helpers."""
    eventually_blocking(lambda: status(sidecar.metrics + "/readyz") == 200, "/readyz to turn 200", 60)
    token = sidecar.client("tokenrelay", "token").strip()
    request = urllib.request.Request(
        sidecar.emulator.url + "/iam/v2beta1/groups", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert "acme" in json.loads(response.read())["groups"][0]["name"]
    host = sidecar.emulator.url.removeprefix("http://")
    env = {"TOKENRELAY_HOSTS": f"{host}={sidecar.emulator.url}"}
    docker = json.loads(sidecar.client("docker-credential-tokenrelay", "get", stdin=host, env=env))
    assert (docker["ServerURL"], docker["Secret"]) == (host, token)
    git = sidecar.client("git-credential-tokenrelay", "get", stdin=f"protocol=http\nhost={host}\n\n", env=env)
    assert f"password={token}" in git.splitlines()
    logs = sidecar.image.engine.docker("logs", sidecar.container).stderr
    assert token not in logs and "token refreshed" in logs


def test_the_image_and_the_idle_sidecar_are_as_small_as_documented(sidecar: Sidecar) -> None:
    """The image's size and the idle sidecar's resident memory in its container are the figures
    docs/operations.md gives (within 15% and 30%)."""
    eventually_blocking(lambda: status(sidecar.metrics + "/readyz") == 200, "/readyz to turn 200", 60)
    size_mb = sidecar.image.size_bytes / 1e6
    assert abs(size_mb - documented("Image size")) <= 0.15 * documented("Image size"), size_mb
    pid = sidecar.image.engine.docker("inspect", "--format={{.State.Pid}}", sidecar.container).stdout
    rss_kb = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid.strip()}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    rss_mb = rss_kb * 1024 / 1e6
    assert abs(rss_mb - documented("Idle RSS")) <= 0.3 * documented("Idle RSS"), rss_mb


def test_the_webhook_runs_from_the_same_image(image: Image) -> None:
    """``tokenrelay webhook`` from the image, hardened, with its TLS directory mounted read-only, answers
    an AdmissionReview over verified TLS as the mutation does in-process."""
    tls_dir = short_dir("tr-webhook-", 0o755)
    ca, _ = write_pki(tls_dir, time.time())
    for child in tls_dir.iterdir():
        child.chmod(0o644)
    port, metrics = free_port(), free_port()
    container = image.engine.docker(
        "run", "--detach", *HARDENED, f"--volume={tls_dir}:/tls:ro", "--entrypoint=tokenrelay", image.tag,
        "webhook", "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics}",
        "--tls-dir", "/tls", "--namespace", "tokenrelay-system", "--shutdown-delay", "0",
        "--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url, "--image", INJECTOR.image,
    ).stdout.strip()  # fmt: skip
    try:
        eventually_blocking(lambda: status(f"http://127.0.0.1:{metrics}/readyz") == 200, "webhook ready", 60)
        fixture = FIXTURES["03-istio-native"]
        body = review(copy.deepcopy(fixture["pod"]), fixture["namespace"], uid="uid-image")
        tls = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
        tls.check_hostname = False  # the certificate names HOST; the address is loopback
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}/mutate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Host": HOST},
        )
        with urllib.request.urlopen(request, timeout=10, context=tls) as response:
            answer = json.loads(response.read())
        expected, _ = admission.answer(body, INJECTOR, {"kube-system", "tokenrelay-system"})
        assert answer == expected
    finally:
        image.engine.docker("rm", "--force", container, check=False)
        for child in tls_dir.iterdir():
            child.unlink()
        tls_dir.rmdir()


def test_the_image_leaves_out_the_emulator_and_pip_and_says_so(image: Image) -> None:
    """Neither pip nor the emulator's gRPC stack is in the image; ``tokenrelay emulate`` there is one line
    naming what is missing, exit 2."""
    probe = image.engine.docker(
        "run", "--rm", *HARDENED, "--entrypoint=python", image.tag, "-c", PRESENT,
    )  # fmt: skip
    assert probe.stdout.strip() == "[]"
    result = image.engine.docker(
        "run", "--rm", *HARDENED, "--entrypoint=tokenrelay", image.tag, "emulate", "--listen", "127.0.0.1:0",
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("tokenrelay emulate: this installation lacks the Python module ")
    assert "pip install tokenrelay" in result.stderr


# Run in the image: the extension modules (ELF shared objects) of the virtualenv that still hold debug
# sections, read from their section headers (ELF64, little-endian: the image's platform).
DEBUG_SECTIONS = r"""
import pathlib, struct
found = []
for path in pathlib.Path("/opt/tokenrelay").rglob("*.so*"):
    data = path.read_bytes() if path.is_file() else b""
    if data[:4] != b"\x7fELF":
        continue
    shoff, = struct.unpack_from("<Q", data, 0x28)
    size, count, names = struct.unpack_from("<HHH", data, 0x3A)
    table = struct.unpack_from("<Q", data, shoff + names * size + 0x18)[0]
    for i in range(count):
        name = struct.unpack_from("<I", data, shoff + i * size)[0]
        if data[table + name : table + name + 7] == b".debug_":
            found.append(path.name)
            break
print(len(list(pathlib.Path("/opt/tokenrelay").rglob("*.so*"))), sorted(set(found)))
"""


def test_the_images_extension_modules_are_stripped(image: Image) -> None:
    """The builder stage strips the extension modules (uvloop, cryptography, aiohttp, PyYAML...) of
    their debug symbols, about 25 MB an image would carry to every pod for nothing."""
    probe = image.engine.docker(
        "run", "--rm", *HARDENED, "--entrypoint=python", image.tag, "-c", DEBUG_SECTIONS,
    )  # fmt: skip
    count, found = probe.stdout.split(" ", 1)
    assert int(count) > 10  # the probe did look at them
    assert found.strip() == "[]"


def test_a_runtime_base_without_the_builders_python_is_a_build_error_naming_the_fix(image: Image) -> None:
    """PYTHON_IMAGE changed without BUILDER_IMAGE (another Python, or none): the build stops with one
    line naming both build arguments, instead of an image whose entrypoint cannot start."""
    image.engine.docker("import", str(base_archive(NO_PYTHON)), "local/debian:bookworm-no-python")
    result = build_on(image.engine, "local/debian:bookworm-no-python")
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert "error: BUILDER_IMAGE and PYTHON_IMAGE must carry the same Python" in said
    assert "pass --build-arg BUILDER_IMAGE" in said
