"""deploy/injector/: both overlays render, validate, keep least privilege, and select only opted-in pods."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tokenrelay.kube import webhook

from ..support import kube
from ..support.kube import REPO, SCHEMAS
from ..support.podsecurity import violations

OVERLAYS = ("self-signed", "cert-manager")
Doc = dict[str, Any]


def render(overlay: str) -> list[Doc]:
    return kube.render(Path("deploy") / "injector" / overlay)


def render_with_component(overlay: str, component: str, tmp_path: Path) -> list[Doc]:
    """An overlay with a component, as a user's own kustomization would use them (kustomize wants
    relative paths)."""
    injector = Path(os.path.relpath(REPO / "deploy" / "injector", tmp_path))
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [str(injector / overlay)], "components": [str(injector / component)]})
    )
    return kube.render(tmp_path)


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Doc]]:
    return {overlay: render(overlay) for overlay in OVERLAYS}


def one(docs: list[Doc], kind: str) -> Doc:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def settings_of(docs: list[Doc]) -> webhook.WebhookSettings:
    """The webhook's settings, parsed by its own parser from the Deployment's args and env."""
    import argparse

    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["tokenrelay", "webhook"]
    parser = argparse.ArgumentParser()
    webhook.add_arguments(parser)
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    env["POD_NAMESPACE"] = one(docs, "Deployment")["metadata"]["namespace"]
    return webhook.webhook_settings(parser.parse_args(container["args"]), env)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_objects_pass_the_1_29_to_1_32_schemas(overlay: str, rendered: dict[str, list[Doc]]) -> None:
    """Every Kubernetes object validates strictly; the cert-manager objects are the only other kinds."""
    for doc in rendered[overlay]:
        if doc["apiVersion"].startswith("cert-manager.io/"):
            assert overlay == "cert-manager"
            continue
        for version in SCHEMAS:
            kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_injector_is_highly_available_restricted_and_really_probed(
    overlay: str, rendered: dict[str, list[Doc]]
) -> None:
    """Two replicas, a PDB keeping one, no unavailable replica in a rollout, the restricted profile, and
    readiness on /readyz over the HTTPS listener."""
    docs = rendered[overlay]
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    spec = deployment["spec"]["template"]["spec"]
    assert violations(spec) == []
    container = spec["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config = settings_of(docs)
    assert ports["https"] == config.listen[1]
    assert config.metrics_listen is not None
    assert ports["metrics"] == config.metrics_listen[1]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["tls"] == str(config.tls_dir)
    assert one(docs, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_webhook_configuration_fails_closed_for_opted_in_pods_only(
    overlay: str, rendered: dict[str, list[Doc]]
) -> None:
    """Each webhook fails closed, calls the Service's /mutate on pod CREATE only, and never selects
    kube-system or the injector's namespace; the certificate names the Service."""
    docs = rendered[overlay]
    config = settings_of(docs)
    service = one(docs, "Service")
    configuration = one(docs, "MutatingWebhookConfiguration")
    assert configuration["metadata"]["name"] == config.webhook_configuration
    assert service["metadata"]["name"] == config.service
    assert config.dns_names[0] == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    for hook in configuration["webhooks"]:
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] <= 10
        assert hook["clientConfig"]["service"] == {
            "name": service["metadata"]["name"],
            "namespace": service["metadata"]["namespace"],
            "path": "/mutate",
            "port": next(p["port"] for p in service["spec"]["ports"] if p["name"] == "https"),
        }
        assert hook["rules"] == [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ]
        excluded = next(
            e
            for e in hook["namespaceSelector"]["matchExpressions"]
            if e["key"] == "kubernetes.io/metadata.name"
        )
        assert excluded["operator"] == "NotIn"
        assert set(excluded["values"]) == config.excluded


def test_self_signed_rbac_is_least_privilege(rendered: dict[str, list[Doc]]) -> None:
    """The webhook may get/update its one Secret and get/patch its one configuration: nothing else, and
    no create (the install makes the empty Secret)."""
    docs = rendered["self-signed"]
    config = settings_of(docs)
    assert config.cert_secret == "tokenrelay-injector-tls"
    role, cluster_role = one(docs, "Role"), one(docs, "ClusterRole")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [config.cert_secret],
            "verbs": ["get", "update"],
        }
    ]
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": [config.webhook_configuration],
            "verbs": ["get", "patch"],
        }
    ]
    secret = one(docs, "Secret")
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == (
        config.cert_secret,
        config.namespace,
    )
    assert "data" not in secret
    sa = one(docs, "ServiceAccount")["metadata"]["name"]
    for binding in (one(docs, "RoleBinding"), one(docs, "ClusterRoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": config.namespace}]
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "tls", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]


def test_cert_manager_overlay_injects_the_ca_and_needs_no_rbac(rendered: dict[str, list[Doc]]) -> None:
    """cert-manager issues the certificate for the Service's names, its cainjector fills the caBundle,
    the Secret is mounted where the webhook reads it, and the webhook has no Role at all."""
    docs = rendered["cert-manager"]
    config = settings_of(docs)
    assert config.cert_secret is None
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "Secret"}
    certificate = next(d for d in docs if d["kind"] == "Certificate" and not d["spec"].get("isCA"))
    assert certificate["spec"]["dnsNames"] == config.dns_names
    configuration = one(docs, "MutatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    )
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["secret"]["secretName"] == certificate["spec"]["secretName"]
    issuer = next(
        d
        for d in docs
        if d["kind"] == "Issuer" and d["metadata"]["name"] == certificate["spec"]["issuerRef"]["name"]
    )
    ca = next(d for d in docs if d["kind"] == "Certificate" and d["spec"].get("isCA"))
    assert issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]


def configuration_names(docs: list[Doc]) -> set[str]:
    """Every place that names the MutatingWebhookConfiguration: the object itself, the webhook's
    --webhook-configuration (whose caBundle it keeps) and, in self-signed mode, the RBAC's resourceNames."""
    names = {
        one(docs, "MutatingWebhookConfiguration")["metadata"]["name"],
        settings_of(docs).webhook_configuration,
    }
    for role in (d for d in docs if d["kind"] == "ClusterRole"):
        names |= {n for rule in role["rules"] for n in rule["resourceNames"]}
    return names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_names_one_webhook_configuration(overlay: str, rendered: dict[str, list[Doc]]) -> None:
    """The configuration, the flag and the RBAC agree on its name: else the caBundle is never written
    and opted-in pods fail with x509 errors."""
    assert configuration_names(rendered[overlay]) == {"tokenrelay-injector"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_first_component_renames_the_configuration_everywhere(overlay: str, tmp_path: Path) -> None:
    """components/first (for Istio) renames the configuration so that it sorts before Istio's, in the
    object, the webhook's flag and the RBAC alike, and changes nothing else."""
    docs = render_with_component(overlay, "components/first", tmp_path)
    (name,) = configuration_names(docs)
    assert name == "0-tokenrelay-injector" < "istio-sidecar-injector"
    plain = render(overlay)
    assert len(docs) == len(plain)
    assert (
        one(docs, "MutatingWebhookConfiguration")["webhooks"]
        == one(plain, "MutatingWebhookConfiguration")["webhooks"]
    )
    assert settings_of(docs).cert_secret == settings_of(plain).cert_secret
