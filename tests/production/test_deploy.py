"""deploy/: every kustomize overlay renders, passes the Kubernetes schemas and the restricted profile."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenrelay.kube import mutation
from tokenrelay.sidecar.settings import parse_args

from ..support import kube
from ..support.production import REPO

DEPLOY = REPO / "deploy"
OVERLAYS = ["base", "overlays/proxy", "overlays/job"]
K8S_VERSION = "1.30.0"  # the oldest release we document: native sidecars on by default since 1.29


def render(overlay: str) -> list[dict[str, Any]]:
    """``kubectl kustomize`` of ``deploy/<overlay>``."""
    return kube.render(DEPLOY / overlay)


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc["kind"] in ("Deployment", "Job"):
        spec: dict[str, Any] = doc["spec"]["template"]["spec"]
        return spec
    return None


def containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def sidecar(spec: dict[str, Any]) -> dict[str, Any]:
    relay: dict[str, Any] = next(c for c in spec["initContainers"] if c["name"] == "tokenrelay")
    return relay


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {overlay: render(overlay) for overlay in OVERLAYS}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_passes_the_kubernetes_schemas(
    overlay: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """Every rendered object validates offline against the Kubernetes OpenAPI schemas (strict)."""
    import kubernetes_validate

    docs = rendered[overlay]
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_meet_the_restricted_profile(overlay: str, rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Every container runs non-root, read-only, without privilege escalation or capabilities, seccomp on."""
    specs = [s for doc in rendered[overlay] if (s := pod_spec(doc)) is not None]
    assert len(specs) == 1
    for spec in specs:
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True
        assert pod_sc["runAsUser"] != 0
        assert pod_sc["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec["automountServiceAccountToken"] is False
        for volume in spec["volumes"]:
            assert set(volume) - {"name"} <= {"projected", "emptyDir", "configMap", "secret"}
        for container in containers(spec):
            sc = container["securityContext"]
            assert sc["runAsNonRoot"] is True, container["name"]
            assert sc["readOnlyRootFilesystem"] is True, container["name"]
            assert sc["allowPrivilegeEscalation"] is False, container["name"]
            assert sc["capabilities"] == {"drop": ["ALL"]}, container["name"]
            assert sc["seccompProfile"]["type"] == "RuntimeDefault", container["name"]
            assert container["resources"]["requests"]
            assert container["resources"]["limits"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_shipped_podmonitor_scrapes_the_hand_written_sidecar(
    overlay: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """deploy/monitoring's PodMonitor selects every pod and scrapes the port name that the sidecar of
    deploy/base and its overlays carries, the same name the injector gives its sidecars."""
    monitor = yaml.safe_load((DEPLOY / "monitoring" / "podmonitor.yaml").read_text())
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    assert monitor["spec"]["selector"] == {}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == mutation.METRICS_PORT_NAME
    (spec,) = [s for doc in rendered[overlay] if (s := pod_spec(doc)) is not None]
    ports = {p["name"]: p["containerPort"] for p in sidecar(spec)["ports"]}
    assert ports[endpoint["port"]] == 9090


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_tokenrelay_is_a_native_sidecar_gating_the_app(
    overlay: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """tokenrelay is an init container with restartPolicy Always, started-up on /readyz, alive on /healthz."""
    (spec,) = [s for doc in rendered[overlay] if (s := pod_spec(doc)) is not None]
    relay = sidecar(spec)
    assert relay["restartPolicy"] == "Always"
    assert relay["image"] == "ghcr.io/example/tokenrelay:0.1.0"
    assert relay["startupProbe"]["httpGet"] == {"path": "/readyz", "port": "tr-metrics"}
    assert relay["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "tr-metrics"}
    assert relay["ports"][0]["containerPort"] == 9090
    mounts = {m["name"]: m["mountPath"] for m in relay["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    projected = volumes["oidc-token"]["projected"]["sources"][0]["serviceAccountToken"]
    assert projected["expirationSeconds"] == 600
    assert projected["audience"] == "https://auth.example.com"
    assert f"{mounts['oidc-token']}/{projected['path']}" == "/var/run/secrets/tokens/oidc-token"
    assert "emptyDir" in volumes["tokenrelay-socket"]
    app_mounts = {m["name"]: m["mountPath"] for c in spec["containers"] for m in c["volumeMounts"]}
    assert app_mounts["tokenrelay-socket"] == mounts["tokenrelay-socket"] == "/var/run/tokenrelay"


def test_configmap_is_a_config_tokenrelay_accepts(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """The base's config.toml loads with tokenrelay's own parser and matches the pod's mounts and probes."""
    (configmap,) = [d for d in rendered["base"] if d["kind"] == "ConfigMap"]
    settings = parse_args(["--config", str(DEPLOY / "base" / "config.toml")], {})
    assert configmap["data"]["config.toml"] == (DEPLOY / "base" / "config.toml").read_text()
    assert settings.metrics_listen == ("0.0.0.0", 9090)
    assert settings.socket == "/var/run/tokenrelay/tokenrelay.sock"
    assert settings.id_token_file == "/var/run/secrets/tokens/oidc-token"


def test_proxy_overlay_turns_the_proxy_on(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """The proxy overlay adds --proxy-listen on loopback and points the app at it."""
    (spec,) = [s for doc in rendered["overlays/proxy"] if (s := pod_spec(doc)) is not None]
    assert "--proxy-listen=127.0.0.1:8080" in sidecar(spec)["args"]
    env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    assert env["API_URL"] == "http://127.0.0.1:8080"


def test_job_overlay_is_a_job_only(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """The job overlay yields a Job (no Deployment) whose pod never restarts its main container."""
    kinds = sorted(d["kind"] for d in rendered["overlays/job"])
    assert kinds == ["ConfigMap", "Job", "ServiceAccount"]
    (job,) = [d for d in rendered["overlays/job"] if d["kind"] == "Job"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    configmap = next(d for d in rendered["overlays/job"] if d["kind"] == "ConfigMap")
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tokenrelay-config"]["configMap"]["name"] == configmap["metadata"]["name"]


def test_kubelet_credential_provider_config() -> None:
    """The kubelet example runs `tokenrelay kubelet-credential-provider` with per-service-account caching."""
    config = yaml.safe_load((DEPLOY / "kubelet" / "credential-provider-config.yaml").read_text())
    assert config["apiVersion"] == "kubelet.config.k8s.io/v1"
    assert config["kind"] == "CredentialProviderConfig"
    (provider,) = config["providers"]
    assert provider["name"] == "tokenrelay"
    assert provider["args"] == ["kubelet-credential-provider"]
    assert provider["apiVersion"] == "credentialprovider.kubelet.k8s.io/v1"
    assert provider["matchImages"]
    assert provider["defaultCacheDuration"]
    attributes = provider["tokenAttributes"]
    assert attributes["serviceAccountTokenAudience"] == "https://auth.example.com"
    assert attributes["cacheType"] == "ServiceAccount"
    assert attributes["requireServiceAccount"] is True


def test_github_actions_example_uses_once() -> None:
    """The workflow example grants id-token: write and runs --once with the github-actions source."""
    workflow = yaml.safe_load((DEPLOY / "github-actions" / "workflow.yaml").read_text())
    assert workflow["permissions"]["id-token"] == "write"
    runs = " ".join(step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"])
    assert "tokenrelay run --once" in runs
    assert "--id-token-source github-actions" in runs
    assert "--token-file" in runs
    args = ["--once", "--id-token-source", "github-actions", "--token-file", "/tmp/t"]
    env = next(iter(workflow["jobs"].values()))["env"]
    settings = parse_args(args, env)
    assert settings.once
    assert settings.token_files == (("/tmp/t", "https://api.example.com"),)


def test_github_actions_example_runs_docker_under_exec() -> None:
    """The workflow's registry job runs docker under `tokenrelay exec` (the github-actions source, a
    token for every host the helper serves, --configure docker), as docs/exec.md recommends: no relay
    left running in the background, and no step that overwrites ~/.docker/config.json."""
    from tokenrelay.helpers.hosts import load

    job = yaml.safe_load((DEPLOY / "github-actions" / "workflow.yaml").read_text())["jobs"]["registry"]
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "tokenrelay run" not in runs and "nohup" not in runs and "&\n" not in runs
    assert ".docker/config.json" not in runs
    words = shlex.split(runs.split("tokenrelay exec ", 1)[1])
    at = words.index("--")
    relay, command = words[:at], words[at + 1 :]
    assert command[:2] == ["docker", "pull"]
    configure = relay.index("--configure")
    assert "docker" in relay[configure + 1].split(",")
    del relay[configure : configure + 2]  # exec's own flag; the rest are run's
    settings = parse_args(relay, job["env"])
    assert settings.id_token_source == "github-actions"
    # exec keeps a token fresh for each of the hosts, the helper's list
    assert [host.netloc for host in load(job["env"])] == ["registry.example.com"]
    assert settings.hosts == ("registry.example.com",)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_sidecar_sees_the_oidc_token(
    overlay: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """SECURITY.md's claim: the projected OIDC token is mounted in the sidecar only, and no container
    gets a Kubernetes API token."""
    (spec,) = [s for doc in rendered[overlay] if (s := pod_spec(doc)) is not None]
    projected = {v["name"] for v in spec["volumes"] if "projected" in v}
    mounting = {
        c["name"] for c in containers(spec) for m in c.get("volumeMounts", []) if m["name"] in projected
    }
    assert mounting == {"tokenrelay"}
    assert spec["automountServiceAccountToken"] is False


def _overlay_files() -> dict[str, str]:
    """docs/monitoring.md's overlay: its two YAML blocks, by the file name each one's comment gives."""
    page = (REPO / "docs" / "monitoring.md").read_text()
    section = page[page.index("<!-- the overlay:") :]
    blocks = re.findall(r"```yaml\n# (\S+)[^\n]*\n(.*?)```", section, flags=re.DOTALL)[:2]
    return {name.rstrip(":"): body for name, body in blocks}


def test_the_documented_monitoring_overlay_labels_everything_and_moves_the_runbook_links(
    tmp_path: Path,
) -> None:
    """docs/monitoring.md's overlay, beside this checkout, gives every PodMonitor, ServiceMonitor and
    PrometheusRule of deploy/ the Prometheus's selector label, and every runbook link the docs' new
    home with its anchor kept; its ConfigMap of settings is not applied."""
    files = _overlay_files()
    assert set(files) == {"kustomization.yaml", "runbooks.yaml"}
    overlay = tmp_path / "monitoring"
    overlay.mkdir()
    checkout = os.path.relpath(REPO, overlay)
    for name, body in files.items():
        (overlay / name).write_text(body.replace("../tokenrelay/", f"{checkout}/"))
    docs = kube.render(overlay)
    operator = [d for d in docs if d["apiVersion"].startswith("monitoring.coreos.com/")]
    assert {d["kind"] for d in operator} == {"PodMonitor", "ServiceMonitor", "PrometheusRule"}
    assert all(d["metadata"]["labels"]["release"] == "kube-prometheus-stack" for d in operator)
    urls = [
        r["annotations"]["runbook_url"]
        for d in operator
        if d["kind"] == "PrometheusRule"
        for g in d["spec"]["groups"]
        for r in g["rules"]
    ]
    shipped = [
        r["annotations"]["runbook_url"]
        for path in DEPLOY.rglob("prometheusrule.yaml")
        for g in yaml.safe_load(path.read_text())["spec"]["groups"]
        for r in g["rules"]
    ]
    assert sorted(urls) == sorted(
        "https://docs.example.com/tokenrelay/runbooks.html#" + url.partition("#")[2] for url in shipped
    )
    assert not [d for d in docs if d["metadata"]["name"] == "tokenrelay-runbooks"]


def _workloads() -> list[dict[str, Any]]:
    """Every pod template deploy/ ships: the sidecar's, the injector's, the agent's."""
    return [
        d
        for overlay in ("base", "injector/self-signed", "agent/base")
        for d in render(overlay)
        if d["kind"] in ("Deployment", "DaemonSet", "Job")
    ]


@pytest.mark.parametrize(
    "policy", ["monitoring/networkpolicy.yaml", "agent/monitoring/networkpolicy.yaml",
               "monitoring/networkpolicy-sidecars.yaml"],
)  # fmt: skip
def test_each_network_policy_opens_ports_of_the_pods_it_selects(policy: str) -> None:
    """A shipped NetworkPolicy selects tokenrelay's pods (the injector's, the agent's, or with the
    sidecars' every pod of the namespace) and each port it opens is a named port of those pods: a
    renamed port or label cannot leave Prometheus shut out."""
    spec = yaml.safe_load((DEPLOY / policy).read_text())["spec"]
    wanted = spec["podSelector"].get("matchLabels", {})
    selected = [
        w["spec"]["template"]
        for w in _workloads()
        if wanted.items() <= w["spec"]["template"]["metadata"].get("labels", {}).items()
    ]
    if wanted:
        assert len(selected) == 1
    ports = {
        port["name"]
        for template in selected
        for c in containers(template["spec"])
        for port in c.get("ports", [])
        if "name" in port
    }
    opened = {port["port"] for rule in spec["ingress"] for port in rule["ports"]}
    assert opened and opened <= ports
