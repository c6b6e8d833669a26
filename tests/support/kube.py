"""The injector suite's pieces: real-shaped pods (tests/kube/pods), AdmissionReviews around them,
the checks on a patched pod, and the installed ``tokenrelay`` script.
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import yaml

from tokenrelay.kube import admission, mutation

PODS = Path(__file__).resolve().parents[1] / "kube" / "pods"
SCHEMAS = ("1.29.0", "1.30.0", "1.31.0", "1.32.0")
INJECTOR = mutation.Injector(
    auth_url="https://auth.example.com",
    api_url="https://api.example.com",
    image="ghcr.io/example/tokenrelay:0.1.0",
)


def fixtures() -> dict[str, dict[str, Any]]:
    """Every pod fixture by file stem: ``pod``, ``namespace`` and the test hints beside them."""
    return {path.stem: yaml.safe_load(path.read_text()) for path in sorted(PODS.glob("*.yaml"))}


FIXTURES = fixtures()


def review(
    pod: dict[str, Any], namespace: str, uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002"
) -> dict[str, Any]:
    """An AdmissionReview v1 for the creation of ``pod``, as the API server sends it."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"].get("name", ""),
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "4b8f3c2a-1d0e-4f5a-9b8c-7d6e5f4a3b2c",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
            },
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def patched(pod: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with the AdmissionReview response's patch applied by a real JSON-patch library."""
    ops = json.loads(base64.b64decode(response["response"]["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(pod, ops)
    return result


def ops_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    patch = response["response"].get("patch")
    return json.loads(base64.b64decode(patch)) if patch else []


def webhook(pod: dict[str, Any], namespace: str = "team-a") -> tuple[dict[str, Any], str]:
    return admission.answer(review(pod, namespace), INJECTOR)


def without(document: dict[str, Any], pointers: list[str]) -> dict[str, Any]:
    """A copy of ``document`` without the members at ``pointers``."""
    copied = copy.deepcopy(document)
    for pointer in pointers:
        *parents, last = pointer.split("/")[1:]
        target: Any = copied
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        del target[last]
    return copied


def validate(pod: dict[str, Any]) -> None:
    """``pod`` passes the strict OpenAPI schemas of Kubernetes 1.29 to 1.32."""
    for version in SCHEMAS:
        kubernetes_validate.validate(pod, version, strict=True)


def strip_injection(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` less everything the injector adds: what must be left is the pod as it was."""
    out = copy.deepcopy(pod)
    spec = out["spec"]
    spec["initContainers"] = [c for c in spec["initContainers"] if c["name"] != mutation.CONTAINER]
    if not spec["initContainers"]:
        del spec["initContainers"]
    spec["volumes"] = [
        v for v in spec["volumes"] if v["name"] not in (mutation.SOCKET_VOLUME, mutation.TOKEN_VOLUME)
    ]
    if not spec["volumes"]:
        del spec["volumes"]
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        for field, drop in (
            ("env", (mutation.SOCKET_ENV, mutation.PROXY_ENV)),
            ("volumeMounts", (mutation.SOCKET_VOLUME,)),
        ):
            if field in container:
                container[field] = [e for e in container[field] if e["name"] not in drop]
                if not container[field]:
                    del container[field]
    annotations = out["metadata"]["annotations"]
    del annotations["tokenrelay.dev/status"]
    if not annotations:
        del out["metadata"]["annotations"]
    return out


def sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["initContainers"] if c["name"] == mutation.CONTAINER)
    return found


REPO = Path(__file__).resolve().parents[2]


def cli() -> str:
    """The installed ``tokenrelay`` console script (beside this interpreter: the venv's)."""
    path = Path(sys.executable).parent / "tokenrelay"
    found = str(path) if path.exists() else shutil.which("tokenrelay")
    assert found, "tokenrelay is not installed: pip install -e ."
    return found


def render(kustomization: Path) -> list[dict[str, Any]]:
    """The documents ``kubectl kustomize`` renders from ``kustomization`` (relative to the repository)."""
    import os

    import pytest

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is not installed, and CI is set")
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(REPO / kustomization)], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@dataclass
class RunningWebhook:
    """A ``tokenrelay webhook`` process and its JSON log records up to the point it served."""

    process: subprocess.Popen[str]
    records: list[dict[str, Any]]

    def listen(self, message: str) -> str:
        """The ``listen`` address of the log record ``message`` (``webhook serving``, ``metrics serving``)."""
        return str(next(r["listen"] for r in self.records if r["msg"] == message))

    def stop(self) -> int:
        """SIGTERM, then the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(30)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status


def start_webhook(tls_dir: Path, *args: str, env: dict[str, str]) -> RunningWebhook:
    """``tokenrelay webhook`` on loopback (INJECTOR's settings, namespace tokenrelay-system), as a user
    runs it; returns once it serves both its listeners."""
    command = [cli(), "webhook", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]
    command += ["--tls-dir", str(tls_dir), "--namespace", "tokenrelay-system", "--shutdown-delay", "0"]
    command += ["--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url, "--image", INJECTOR.image]
    process = subprocess.Popen([*command, *args], stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    running = RunningWebhook(process, [])
    for line in process.stderr:
        running.records.append(json.loads(line))
        if {"webhook serving", "metrics serving"} <= {r["msg"] for r in running.records}:
            return running
    raise AssertionError(f"tokenrelay webhook exited {process.wait()} before serving: {running.records}")
