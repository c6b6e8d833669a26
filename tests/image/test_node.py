"""The product as it ships, on a real node: the image of the Dockerfile, the workload of deploy/ and one
the webhook injects, started by a real kubelet, exchanging the kubelet's projected service-account
tokens against the emulator (``--trust-issuer`` with the cluster's JWKS) on the host's loopback.

CNI=none: the pods use the host's network (no cluster DNS, no kube-proxy), so every port is a free
port of this machine.
"""

from __future__ import annotations

import base64
import datetime
import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenrelay.kube import mutation
from tokenrelay.testing import loopback_certificates

from ..support.image import REPO, TOKENRELAY, Image, RunningEmulator, emulator
from ..support.node import IMAGE_REF, Node, running_node
from ..support.paths import short_dir
from ..support.production import free_port
from ..support.waiting import eventually_blocking

pytestmark = pytest.mark.e2e

# The app container: the same image, a script that asks the sidecar for the token over the socket and
# calls the API through the proxy (API_URL) or, with no proxy, directly with that token; it prints what it
# got (a fingerprint, never the token) and waits to be stopped.
APP = """
import json, os, signal, subprocess, sys, time, urllib.request
from tokenrelay.lite.redact import fingerprint
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # PID 1 gets no default action
token = subprocess.run(["tokenrelay", "token"], capture_output=True, text=True)
proxy = os.environ.get("API_URL")
request = urllib.request.Request((proxy or os.environ["DIRECT_API_URL"]) + "/iam/v2beta1/groups")
if not proxy:
    request.add_header("Authorization", "Bearer " + token.stdout.strip())
with urllib.request.urlopen(request, timeout=10) as response:
    groups = [group["name"] for group in json.loads(response.read())["groups"]]
said = {"token": token.returncode, "fingerprint": fingerprint(token.stdout.strip()),
        "via": "proxy" if proxy else "direct", "status": response.status, "groups": groups}
print(json.dumps(said), flush=True)
time.sleep(86400)
"""


@dataclass
class Cluster:
    node: Node
    emulator: RunningEmulator
    issuer: str
    viewer_role: str
    owner_token: str

    def identity(self, namespace: str, service_account: str) -> str:
        """An identity of the seed organization matching the service account's tokens, bound viewer."""
        subject = f"system:serviceaccount:{namespace}:{service_account}"
        org = self.emulator.organization
        identity = self.emulator.call(
            "POST", f"/iam/v2beta1/identities/{org}", self.owner_token,
            {"name": service_account, "claimMatch": {"issuer": self.issuer, "subject": subject}},
        )  # fmt: skip
        self.emulator.call(
            "POST", f"/iam/v2beta1/roleBindings/{org}", self.owner_token,
            {"identityUid": identity["uid"], "roleUid": self.viewer_role},
        )  # fmt: skip
        uid: str = identity["uid"]
        return uid


@pytest.fixture(scope="module")
def cluster(image: Image) -> Iterator[Cluster]:
    with running_node(image) as node:
        issuer = json.loads(node.kubectl("get", "--raw", "/.well-known/openid-configuration").stdout)[
            "issuer"
        ]
        keys = node.directory / "cluster-jwks.json"
        keys.write_text(node.kubectl("get", "--raw", "/openid/v1/jwks").stdout)
        with emulator("--trust-issuer", f"{issuer}={keys}") as upstream:
            owner_token = upstream.api_token(upstream.owner, upstream.mint())
            roles = upstream.call("GET", "/iam/v2beta1/roles", owner_token)["roles"]
            viewer = next(role["uid"] for role in roles if role["name"] == "viewer")
            yield Cluster(node, upstream, issuer, viewer, owner_token)


def render(path: str) -> list[dict[str, Any]]:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(REPO / path)], capture_output=True, text=True, check=True, timeout=60
    )
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]


def as_app(container: dict[str, Any]) -> None:
    """The app container runs APP from the tokenrelay image."""
    container.update(image=IMAGE_REF, imagePullPolicy="Never", command=["python", "-c", APP])
    container.pop("args", None)
    container.pop("ports", None)


def pod_of(node: Node, namespace: str, selector: str) -> dict[str, Any]:
    pods: list[dict[str, Any]] = node.get("pods", "-n", namespace, "-l", selector)["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def app_says(node: Node, namespace: str, selector: str, container: str) -> dict[str, Any]:
    """The app's one line, once it has printed it."""
    said: list[str] = []

    def printed() -> bool:
        logs = node.kubectl("logs", "-n", namespace, "-l", selector, "-c", container, check=False).stdout
        said[:] = [line for line in logs.splitlines() if line.startswith("{")]
        return bool(said)

    eventually_blocking(printed, "the app container's line", 180)
    answer: dict[str, Any] = json.loads(said[0])
    return answer


def sidecar_records(logs: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in logs.splitlines() if line.startswith("{")]


def started(status: dict[str, Any]) -> datetime.datetime:
    return datetime.datetime.fromisoformat(status["state"]["running"]["startedAt"])


def test_the_deploy_workload_runs_on_a_real_node(cluster: Cluster) -> None:
    """deploy/overlays/proxy as shipped (image, hostNetwork and addresses aside) under a real kubelet: the
    startupProbe holds the app back until the sidecar holds a token exchanged for the pod's projected
    token, the app gets that token over the socket and reaches the API through the proxy, and
    `kubectl delete` drains the sidecar to a clean stop."""
    node, upstream = cluster.node, cluster.emulator
    identity = cluster.identity("default", "example-app")
    metrics, proxy = free_port(), free_port()
    objects = render("deploy/overlays/proxy")
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            config = obj["data"]["config.toml"]
            for key, value in (("auth_url", upstream.url), ("api_url", upstream.url), ("identity", identity)):
                config = config.replace(f'{key} = "', f'{key} = "{value}" # ', 1)
            obj["data"]["config.toml"] = config.replace('"0.0.0.0:9090"', f'"0.0.0.0:{metrics}"')
        if obj["kind"] == "Deployment":
            spec = obj["spec"]["template"]["spec"]
            obj["spec"]["replicas"] = 1
            spec["hostNetwork"] = True
            (sidecar,) = spec["initContainers"]
            sidecar.update(image=IMAGE_REF, imagePullPolicy="Never")
            sidecar["ports"][0].update(containerPort=metrics)
            sidecar["args"] = [a.replace(":8080", f":{proxy}") for a in sidecar["args"]]
            (app,) = spec["containers"]
            as_app(app)
            app["env"] = [
                {**e, "value": e["value"].replace(":8080", f":{proxy}")} if e["name"] == "API_URL" else e
                for e in app["env"]
            ]
            projected = spec["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
            projected["audience"] = upstream.url
    node.apply(objects)
    selector = "app.kubernetes.io/name=example-app"
    answer = app_says(node, "default", selector, "app")
    pod = pod_of(node, "default", selector)
    name = pod["metadata"]["name"]
    logs = node.kubectl("logs", name, "-c", "tokenrelay").stdout
    refreshed = [r for r in sidecar_records(logs) if r["msg"] == "token refreshed"]
    assert answer["token"] == 0 and answer["fingerprint"] == refreshed[0]["fingerprint"]
    assert (answer["via"], answer["status"]) == ("proxy", 200) and "acme" in answer["groups"]
    (app_status,) = pod["status"]["containerStatuses"]
    first_token = datetime.datetime.fromisoformat(refreshed[0]["time"].replace("Z", "+00:00"))
    assert started(app_status) >= first_token.replace(microsecond=0), (
        "the app started before a token was held"
    )
    follow = subprocess.Popen(
        ["kubectl", "logs", "--follow", name, "-c", "tokenrelay", "--since=1s"],
        env=node.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        node.kubectl("delete", "deployment", "example-app", "--wait=true")
        node.kubectl("wait", "--for=delete", f"pod/{name}", "--timeout=120s", check=False)
        tail, _ = follow.communicate(timeout=120)
    finally:
        follow.kill()
    messages = [r["msg"] for r in sidecar_records(tail)]
    assert messages[-2:] == ["stopping", "stopped"], tail
    assert not [r for r in sidecar_records(logs + tail) if r["level"] in ("error", "critical")]


def test_a_pod_the_webhook_injects_runs_on_a_real_node(cluster: Cluster) -> None:
    """`tokenrelay webhook` on loopback, registered with deploy/injector's MutatingWebhookConfiguration
    (clientConfig.url and caBundle), injects the sidecar into deploy/injector/example's Deployment as
    the real API server creates its pod; the kubelet runs it and the app gets its token."""
    node, upstream = cluster.node, cluster.emulator
    identity = cluster.identity("team-a", "web")
    objects = [o for o in yaml.safe_load_all((REPO / "deploy/injector/example/app.yaml").read_text()) if o]
    objects = [o for o in objects if o["kind"] in ("Namespace", "ServiceAccount", "Deployment")]
    for obj in objects:
        if obj["kind"] == "Namespace":  # restricted forbids hostNetwork, which CNI=none needs
            del obj["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        if obj["kind"] == "Deployment":
            template = obj["spec"]["template"]
            obj["spec"]["replicas"] = 1
            annotations = template["metadata"]["annotations"]
            # the webhook refuses the proxy on hostNetwork (every process of the node could use it)
            del annotations["tokenrelay.dev/proxy"]
            annotations["tokenrelay.dev/identity"] = identity
            annotations["tokenrelay.dev/metrics-port"] = str(free_port())
            annotations["tokenrelay.dev/oidc-audience"] = upstream.url
            template["spec"]["hostNetwork"] = True
            (app,) = template["spec"]["containers"]
            as_app(app)
            app["env"] = [{"name": "DIRECT_API_URL", "value": upstream.url}]
    try:
        with webhook_for(cluster):
            node.apply(objects)
            selector = "app.kubernetes.io/name=web"
            answer = app_says(node, "team-a", selector, "web")
            pod = pod_of(node, "team-a", selector)
        (sidecar,) = pod["spec"]["initContainers"]
        assert (sidecar["name"], sidecar["image"], sidecar["restartPolicy"]) == (
            "tokenrelay",
            IMAGE_REF,
            "Always",
        )
        logs = node.kubectl("logs", "-n", "team-a", pod["metadata"]["name"], "-c", "tokenrelay").stdout
        refreshed = [r for r in sidecar_records(logs) if r["msg"] == "token refreshed"]
        assert answer["token"] == 0 and answer["fingerprint"] == refreshed[0]["fingerprint"]
        assert (answer["via"], answer["status"]) == ("direct", 200) and "acme" in answer["groups"]
    finally:
        node.kubectl("delete", "namespace", "team-a", "--wait=false", check=False)


def _listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def webhook_for(cluster: Cluster) -> Iterator[None]:
    """`tokenrelay webhook` on loopback, registered with deploy/injector's MutatingWebhookConfiguration
    (clientConfig.url and caBundle); unregistered and stopped afterwards."""
    node, upstream = cluster.node, cluster.emulator
    tls = short_dir("tr-webhook-tls-")
    pki = loopback_certificates(tls)
    for name, source in (("ca.crt", pki.ca), ("tls.crt", pki.cert), ("tls.key", pki.key)):
        (tls / name).write_bytes(Path(source).read_bytes())
    port, hook_metrics = free_port(), free_port()
    webhook = subprocess.Popen(
        [TOKENRELAY, "webhook", "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", f"127.0.0.1:{hook_metrics}", "--tls-dir", str(tls),
         "--namespace", "tokenrelay-system", "--shutdown-delay", "0",
         "--auth-url", upstream.url, "--api-url", upstream.url, "--image", IMAGE_REF],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        configuration = yaml.safe_load(
            (REPO / "deploy/injector/base/mutatingwebhookconfiguration.yaml").read_text()
        )
        ca_bundle = base64.b64encode(Path(pki.ca).read_bytes()).decode()
        for hook in configuration["webhooks"]:
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/mutate", "caBundle": ca_bundle}
        node.apply([configuration])
        eventually_blocking(lambda: webhook.poll() is None and _listens(port), "the webhook to listen", 60)
        yield
    finally:
        node.kubectl("delete", "mutatingwebhookconfiguration", "tokenrelay-injector", check=False)
        webhook.terminate()
        webhook.wait(timeout=30)
        for child in tls.iterdir():
            child.unlink()
        tls.rmdir()


def _agent_objects(cluster: Cluster, metrics: int) -> list[dict[str, Any]]:
    """deploy/agent/base as shipped, but for the image, the addresses, and the host's network (CNI=none:
    no kube-proxy, so the API server is reached on loopback as the node's README says)."""
    server = urllib.parse.urlsplit(
        yaml.safe_load((cluster.node.directory / "kubeconfig").read_text())["clusters"][0]["cluster"][
            "server"
        ]
    )
    objects = render("deploy/agent/base")
    for obj in objects:
        if obj["kind"] != "DaemonSet":
            continue
        spec = obj["spec"]["template"]["spec"]
        spec["hostNetwork"] = True
        for container in [*spec["initContainers"], *spec["containers"]]:
            container.update(image=IMAGE_REF, imagePullPolicy="Never")
        (agent,) = spec["containers"]
        agent["args"] = [a.replace(":9090", f":{metrics}") for a in agent["args"]]
        agent["ports"][0]["containerPort"] = metrics
        settings = {
            "TOKENRELAY_AUTH_URL": cluster.emulator.url,
            "TOKENRELAY_API_URL": cluster.emulator.url,
            "KUBERNETES_SERVICE_HOST": str(server.hostname),
            "KUBERNETES_SERVICE_PORT": str(server.port),
        }
        agent["env"] = [e for e in agent["env"] if e["name"] not in settings]
        agent["env"] += [{"name": k, "value": v} for k, v in settings.items()]
    return objects


def test_agent_mode_pods_share_the_node_agents_one_exchange(cluster: Cluster) -> None:
    """deploy/agent's DaemonSet runs the agent on the node; two replicas of one service account in
    tokenrelay.dev/mode: agent, injected by the webhook with no container added, get their tokens
    through the mounted socket with their kubelet-projected tokens: the same token, from one exchange
    at the emulator's STS."""
    node, upstream = cluster.node, cluster.emulator
    metrics = free_port()
    node.apply(_agent_objects(cluster, metrics))
    node.kubectl(
        "rollout", "status", "-n", "tokenrelay-agent", "daemonset/tokenrelay-agent", "--timeout=180s"
    )
    identity = cluster.identity("team-b", "reports")
    objects = [o for o in yaml.safe_load_all((REPO / "deploy/agent/example/app.yaml").read_text()) if o]
    for obj in objects:
        if obj["kind"] == "Deployment":
            template = obj["spec"]["template"]
            template["metadata"]["annotations"]["tokenrelay.dev/identity"] = identity
            template["spec"]["hostNetwork"] = True
            (app,) = template["spec"]["containers"]
            as_app(app)
            app["env"] = [{"name": "DIRECT_API_URL", "value": upstream.url}]
    try:
        with webhook_for(cluster):
            node.apply(objects)
            selector = "app.kubernetes.io/name=reports"
            said: list[dict[str, Any]] = []

            def both_printed() -> bool:
                logs = node.kubectl(
                    "logs", "-n", "team-b", "-l", selector, "-c", "reports", "--prefix", check=False
                )
                said[:] = [
                    json.loads(line.split(" ", 1)[1]) for line in logs.stdout.splitlines() if " {" in line
                ]
                return len(said) == 2

            eventually_blocking(both_printed, "both replicas' lines", 240)
        pods = node.get("pods", "-n", "team-b", "-l", selector)["items"]
        assert len(pods) == 2
        for pod in pods:
            assert [c["name"] for c in pod["spec"]["containers"]] == ["reports"]
            assert "initContainers" not in pod["spec"]
        assert [(s["token"], s["status"]) for s in said] == [(0, 200), (0, 200)]
        assert "acme" in said[0]["groups"]
        # every exchange mints a new token: one token for both replicas is one exchange
        assert said[0]["fingerprint"] == said[1]["fingerprint"]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as response:
            exported = response.read().decode()
        assert 'tokenrelay_agent_exchanges_total{result="success"} 1.0' in exported
    finally:
        node.kubectl("delete", "namespace", "team-b", "--wait=false", check=False)
        node.kubectl("delete", "namespace", "tokenrelay-agent", "--wait=false", check=False)
        shutil.rmtree(mutation.AGENT_DIR, ignore_errors=True)  # the kubelet made it on this machine
