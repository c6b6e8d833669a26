"""Everything in deploy/, applied to a real API server with server-side dry-run and strict validation.

cert-manager's and the Prometheus Operator's kinds are checked against the CRDs in tests/kube/crds
(minimal, after the upstream ones; their comments say from where), installed first.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..support.k8s import ControlPlane
from ..support.kube import REPO, render

CRDS = Path(__file__).parent / "crds"
KUSTOMIZATIONS = sorted(p.parent.relative_to(REPO) for p in (REPO / "deploy").rglob("kustomization.yaml"))
MANIFESTS = [  # plain YAML
    Path("deploy/injector/example/app.yaml"),
    Path("deploy/agent/example/app.yaml"),
    Path("deploy/monitoring/networkpolicy-sidecars.yaml"),  # applied per namespace
]
INJECTOR_BASE = Path("deploy") / "injector" / "base"
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def with_crds(control_plane: ControlPlane) -> ControlPlane:
    names = []
    for path in sorted(CRDS.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        control_plane.apply(docs)
        names += [f"crd/{d['metadata']['name']}" for d in docs]
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    return control_plane


def dry_run(plane: ControlPlane, docs: list[Doc]) -> tuple[int, str]:
    """``kubectl apply --server-side --dry-run=server --validate=strict``: exit status and stderr."""
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    args = ["apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-"]
    done = plane.kubectl(*args, stdin=text, check=False)
    return done.returncode, done.stderr


def is_component(target: Path) -> bool:
    kustomization = REPO / target / "kustomization.yaml"
    return kustomization.is_file() and yaml.safe_load(kustomization.read_text())["kind"] == "Component"


def documents(target: Path) -> list[Doc]:
    if target.suffix == ".yaml":
        return [d for d in yaml.safe_load_all((REPO / target).read_text()) if d]
    if is_component(target):
        # a component is not installable alone: apply it as its comment says, on the self-signed overlay
        with tempfile.TemporaryDirectory() as scratch:
            rel = Path(os.path.relpath(REPO, scratch))
            (Path(scratch) / "kustomization.yaml").write_text(
                yaml.safe_dump(
                    {
                        "resources": [str(rel / "deploy" / "injector" / "self-signed")],
                        "components": [str(rel / target)],
                    }
                )
            )
            return render(Path(scratch))
    return render(target)


def test_every_kustomization_is_covered() -> None:
    """The list below is deploy/'s: a kustomization added later is checked without editing this file."""
    assert {str(k) for k in KUSTOMIZATIONS} >= {
        "deploy/base",
        "deploy/injector/base",
        "deploy/injector/cert-manager",
        "deploy/injector/self-signed",
        "deploy/monitoring",
        "deploy/overlays/job",
        "deploy/overlays/proxy",
    }


@pytest.mark.parametrize("target", KUSTOMIZATIONS + MANIFESTS, ids=str)
def test_the_api_server_accepts_it_strictly(with_crds: ControlPlane, target: Path) -> None:
    """Every object deploy/ renders is accepted by the API server with strict field validation: no
    unknown or duplicate field, no wrong type, and every admission check a real install would meet."""
    docs = documents(target)
    # A dry run stores nothing, so the objects of a namespace it creates would not find it: create those.
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    if namespaces:
        with_crds.apply(namespaces)
    status, stderr = dry_run(with_crds, docs)
    if target == INJECTOR_BASE:
        # as its kustomization says, not installable alone: each overlay adds the volume "tls"
        assert status == 1
        assert 'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "tls"' in stderr
        return
    assert (status, stderr) == (0, "")


def custom_resources() -> list[Doc]:
    return [
        d
        for k in (Path("deploy/injector/cert-manager"), Path("deploy/monitoring"))
        for d in render(k)
        if d["apiVersion"].startswith(("cert-manager.io/", "monitoring.coreos.com/"))
    ]


def test_strict_validation_of_the_custom_resources_means_something(with_crds: ControlPlane) -> None:
    """With the test CRDs installed, a misspelt field of each custom resource deploy/ uses, or a value
    outside its enum, is refused: the CRDs are not open schemas that accept anything."""
    resources = custom_resources()
    assert {d["kind"] for d in resources} == {
        "Certificate",
        "Issuer",
        "PodMonitor",
        "ServiceMonitor",
        "PrometheusRule",
    }
    with_crds.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tokenrelay-system"}}])
    for resource in resources:
        broken = copy.deepcopy(resource)
        broken["spec"]["secretNmae"] = "typo"
        status, stderr = dry_run(with_crds, [broken])
        assert status == 1
        assert 'unknown field "secretNmae"' in stderr, (resource["kind"], stderr)
    certificate = copy.deepcopy(next(d for d in resources if d["kind"] == "Certificate"))
    certificate["spec"]["privateKey"]["algorithm"] = "ECDSA-P256"
    status, stderr = dry_run(with_crds, [certificate])
    assert status == 1
    assert 'spec.privateKey.algorithm: Unsupported value: "ECDSA-P256"' in stderr, stderr
