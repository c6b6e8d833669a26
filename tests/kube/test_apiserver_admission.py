"""The injector as deploy/injector/ registers it, through a real API server's admission chain.

`tokenrelay webhook` runs as a user runs it; the MutatingWebhookConfiguration is deploy/'s own, with
only its ``clientConfig`` pointed at the webhook on loopback (``url`` and ``caBundle``). Pods are
created with the real kubectl, so what is checked is what the API server stores: the ServiceAccount
and PodSecurity admission plugins, defaulting, and the webhooks' selectors all take part.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tokenrelay.kube import mutation, options
from tokenrelay.testing import loopback_certificates

from ..support.k8s import ControlPlane
from ..support.kube import FIXTURES, INJECTOR, cli, render, start_webhook

Doc = dict[str, Any]
IDENTITY = "tokenrelay.dev/identity"
INJECT = "tokenrelay.dev/inject"


@dataclass
class Injector:
    plane: ControlPlane
    metrics: str

    def admissions(self) -> float:
        """How many AdmissionReviews the webhook has answered, whatever the result."""
        with urllib.request.urlopen(self.metrics + "/metrics", timeout=10) as response:
            text = response.read().decode()
        return sum(
            s.value
            for family in text_string_to_metric_families(text)
            if family.name == "tokenrelay_webhook_admissions"
            for s in family.samples
            if s.name.endswith("_total")
        )


def configuration_on_loopback(url: str, ca: bytes) -> Doc:
    """deploy/injector's MutatingWebhookConfiguration, calling ``url`` instead of the Service."""
    docs = render(Path("deploy") / "injector" / "self-signed")
    (configuration,) = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    for hook in configuration["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": base64.b64encode(ca).decode()}
    return configuration


@pytest.fixture(scope="module")
def injector(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Injector]:
    tls_dir = tmp_path_factory.mktemp("webhook-tls")
    pki = loopback_certificates(tls_dir)  # for 127.0.0.1: the API server checks the url's host
    for source, target in ((pki.ca, "ca.crt"), (pki.cert, "tls.crt"), (pki.key, "tls.key")):
        Path(source).rename(tls_dir / target)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "TOKENRELAY_"))}
    webhook = start_webhook(tls_dir, env=env)
    ca = (tls_dir / "ca.crt").read_bytes()
    try:
        control_plane.apply([configuration_on_loopback(webhook.listen("webhook serving"), ca)])
        yield Injector(control_plane, "http://" + webhook.listen("metrics serving"))
    finally:
        # failurePolicy Fail: left behind, it would refuse the pods of later tests that opted in
        control_plane.kubectl("delete", "mutatingwebhookconfiguration", "tokenrelay-injector", check=False)
        assert webhook.stop() == 0


def namespace(plane: ControlPlane, name: str, labels: dict[str, str], accounts: set[str]) -> None:
    """The namespace and its ServiceAccounts (no controller makes ``default`` here)."""
    plane.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    for account in sorted(accounts):
        metadata = {"name": account, "namespace": name}
        plane.ensure({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata})


def create(plane: ControlPlane, pod: Doc) -> subprocess.CompletedProcess[str]:
    """``kubectl create`` of ``pod``: what a user sees."""
    return plane.kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(pod), check=False)


def created(plane: ControlPlane, pod: Doc, validation: str = "Strict") -> Doc:
    """``pod`` as the API server stores it, created in-process with ``fieldValidation=validation``."""
    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods?fieldValidation={validation}"
    status, stored = plane.request("POST", path, pod)
    assert status == 201, stored
    return stored


def in_namespace(pod: Doc, name: str) -> Doc:
    pod = copy.deepcopy(pod)
    pod["metadata"]["namespace"] = name
    return pod


def account_of(pod: Doc) -> str:
    return str(pod["spec"].get("serviceAccountName") or "default")


@pytest.fixture(scope="module")
def offline() -> dict[str, Doc]:
    """``tokenrelay inject`` of every fixture pod, run once as a user runs it, on a List of them all."""
    pods = {"apiVersion": "v1", "kind": "List", "items": [f["pod"] for f in FIXTURES.values()]}
    args = ["--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url, "--image", INJECTOR.image]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    done = subprocess.run(
        [cli(), "inject", *args], input=json.dumps(pods), capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return dict(zip(FIXTURES, yaml.safe_load(done.stdout)["items"], strict=True))


def comparable(pod: Doc) -> Doc:
    """The stored pod less what the API server makes up per object (names, uid, versions, times, the
    random suffix of the ServiceAccount plugin's token volume), with that volume and its mounts last.

    The ServiceAccount admission plugin appends its volume and mounts to what it finds: after the
    webhook's on one path, before them on the other (``tokenrelay inject``'s pod already has them).
    """
    pod = copy.deepcopy(pod)
    for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields"):
        pod["metadata"].pop(key, None)
    spec = pod["spec"]
    for owner, key in [(spec, "volumes")] + [
        (c, "volumeMounts") for c in [*spec.get("initContainers", []), *spec["containers"]]
    ]:
        if key in owner:
            owner[key].sort(key=lambda entry: entry["name"].startswith("kube-api-access-"))
    text = re.sub(r'"kube-api-access-[a-z0-9]{5}"', '"kube-api-access-*"', json.dumps(pod, sort_keys=True))
    result: Doc = json.loads(text)
    return result


def difference(webhook: Doc, offline: Doc) -> str:
    import difflib

    left, right = (
        json.dumps(comparable(p), indent=1, sort_keys=True).splitlines() for p in (webhook, offline)
    )
    return "\n".join(
        difflib.unified_diff(left, right, "through the webhook", "tokenrelay inject", lineterm="")
    )


def sidecars(pod: Doc) -> list[str]:
    return [c["name"] for c in pod["spec"].get("initContainers", []) if c["name"] == mutation.CONTAINER]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_stored_pod_is_tokenrelay_inject_of_it_plus_the_server_defaults(
    injector: Injector, offline: dict[str, Doc], name: str
) -> None:
    """Created in a namespace that opted in, each fixture pod is stored exactly as `tokenrelay inject`'s
    output of the same pod is stored (the API server's defaults applied to both); the injected output
    passes the webhook untouched."""
    plane = injector.plane
    pod = FIXTURES[name]["pod"]
    # fields newer than this server's schema are dropped (with a warning) from both, not refused
    validation = "Warn" if FIXTURES[name].get("newerThanSchema") else "Strict"
    stored = []
    for where, version in ((f"webhook-{name}", pod), (f"offline-{name}", offline[name])):
        namespace(plane, where, {INJECT: "enabled"}, {account_of(pod)})
        stored.append(created(plane, in_namespace(version, where), validation))
    through_webhook, offline = stored
    # 14-already-injected carries only the status annotation: passed through as it is
    assert sidecars(through_webhook) == ([] if FIXTURES[name].get("injected") else [mutation.CONTAINER])
    assert comparable(through_webhook) == comparable(offline), difference(through_webhook, offline)


def bare(name: str, labels: dict[str, str] | None = None, identity: str | None = "org/bare") -> Doc:
    """A small pod, opted in by ``labels`` or its namespace, with ``identity`` as its annotation."""
    pod: Doc = copy.deepcopy(FIXTURES["12-bare"]["pod"])
    pod["metadata"] = {"name": name, "labels": labels or {}, "annotations": {}}
    if identity:
        pod["metadata"]["annotations"][IDENTITY] = identity
    return pod


@pytest.mark.parametrize(
    ("namespace_label", "pod_label", "injected"),
    [
        ("enabled", None, True),
        ("enabled", "enabled", True),
        ("enabled", "disabled", False),
        (None, "enabled", True),
        (None, None, False),
        (None, "disabled", False),
    ],
    ids=["namespace", "namespace-and-pod", "namespace-pod-opted-out", "pod", "neither", "pod-opted-out"],
)
def test_only_pods_that_opted_in_reach_the_webhook(
    injector: Injector, namespace_label: str | None, pod_label: str | None, injected: bool
) -> None:
    """A pod gets the sidecar when its namespace or its own label opted in, through one call of the
    webhook (not one per webhook of the configuration), and a pod labelled tokenrelay.dev/inject=disabled
    or not opted in is stored untouched without the webhook ever being called, so that an injector
    outage cannot block it."""
    plane = injector.plane
    where = f"optin-{namespace_label or 'none'}-{pod_label or 'none'}"
    namespace(plane, where, {INJECT: namespace_label} if namespace_label else {}, {"default"})
    before = injector.admissions()
    pod = bare("app", {INJECT: pod_label} if pod_label else {})
    stored = created(plane, in_namespace(pod, where))
    assert sidecars(stored) == ([mutation.CONTAINER] if injected else [])
    assert injector.admissions() - before == (1 if injected else 0)


@pytest.mark.parametrize("excluded", ["kube-system", "tokenrelay-system"])
def test_the_excluded_namespaces_are_never_injected(injector: Injector, excluded: str) -> None:
    """In kube-system and the injector's own namespace, a pod that opted in (namespace and pod label)
    is stored untouched, and the webhook is not called."""
    plane = injector.plane
    namespace(plane, excluded, {INJECT: "enabled"}, {"default"})
    try:
        before = injector.admissions()
        stored = created(plane, in_namespace(bare(f"excluded-{excluded}", {INJECT: "enabled"}), excluded))
        assert sidecars(stored) == []
        assert injector.admissions() == before
    finally:
        plane.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": excluded, "labels": {}}})


def test_a_refused_pod_is_not_created_and_kubectl_says_why(injector: Injector) -> None:
    """A pod that opted in without an identity is refused by the webhook: kubectl prints the message
    docs/kubernetes.md shows, naming the annotation to add, and no pod is stored."""
    plane = injector.plane
    namespace(plane, "refused", {INJECT: "enabled"}, {"default"})
    done = create(plane, in_namespace(bare("no-identity", identity=None), "refused"))
    assert done.returncode == 1
    assert done.stderr == (
        'Error from server (Forbidden): error when creating "STDIN": admission webhook '
        '"namespace.inject.tokenrelay.dev" denied the request: tokenrelay: pod refused/no-identity cannot '
        "be injected: no identity: add the annotation tokenrelay.dev/identity: <identity uid> to the pod "
        "template (or give tokenrelay inject --identity)\n"
    )
    assert plane.kubectl("get", "pod", "no-identity", "-n", "refused", check=False).returncode == 1


def test_an_injected_pod_passes_pod_security_restricted(injector: Injector) -> None:
    """In a namespace enforcing Pod Security "restricted", a restricted pod that opted in is stored
    with its sidecar (the PodSecurity plugin judges the pod after the webhook), while a pod that breaks
    the profile is refused there: the check is live."""
    plane = injector.plane
    labels = {INJECT: "enabled", "pod-security.kubernetes.io/enforce": "restricted"}
    namespace(plane, "restricted", labels, {"default"})
    pod = in_namespace(FIXTURES["07-restricted"]["pod"], "restricted")
    assert sidecars(created(plane, pod)) == [mutation.CONTAINER]
    pod["metadata"]["name"] = "escalating"
    pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    done = create(plane, pod)
    assert done.returncode == 1
    assert 'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false' in done.stderr


AGENT_UID = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4/7c4a8d09ca3762af"


def agent_mode(pod: Doc, name: str) -> Doc:
    """``pod`` renamed ``name``, asking for tokenrelay.dev/mode: agent (its sidecar settings dropped)."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["name"] = name
    sidecar_only = {row.name for row in options.TABLE if row.sidecar_only}
    for key in sidecar_only & set(pod["metadata"].get("annotations", {})):
        del pod["metadata"]["annotations"][key]
    pod["metadata"].setdefault("annotations", {}).update(
        {IDENTITY: AGENT_UID, "tokenrelay.dev/mode": "agent"}
    )
    return pod


def test_agent_mode_through_the_admission_chain_adds_no_container(injector: Injector) -> None:
    """In agent mode the stored pod has the containers it was created with and no more, each with the
    agent's socket directory (hostPath, read-only), the pod's projected token and the variables; it
    is what `tokenrelay inject` makes of the same pod."""
    plane = injector.plane
    labels = {INJECT: "enabled", "pod-security.kubernetes.io/enforce": "privileged"}
    namespace(plane, "agent-mode", labels, {"default"})
    pod = in_namespace(agent_mode(FIXTURES["07-restricted"]["pod"], "agent-app"), "agent-mode")
    stored = created(plane, pod)
    assert [c["name"] for c in stored["spec"]["containers"]] == [c["name"] for c in pod["spec"]["containers"]]
    assert "initContainers" not in stored["spec"] and "initContainers" not in pod["spec"]
    for container in stored["spec"]["containers"]:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["TOKENRELAY_SOCKET"] == "/var/run/tokenrelay-agent/agent.sock"
        assert env["TOKENRELAY_AGENT_TOKEN_FILE"] == "/var/run/secrets/tokenrelay/oidc-token"
        assert env["TOKENRELAY_IDENTITY"] == AGENT_UID
    volumes = {v["name"]: v for v in stored["spec"]["volumes"]}
    assert volumes[mutation.AGENT_VOLUME]["hostPath"] == {
        "path": "/var/run/tokenrelay-agent",
        "type": "Directory",
    }
    args = ["--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url, "--image", INJECTOR.image]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    done = subprocess.run(
        [cli(), "inject", *args], input=json.dumps(pod), capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    offline = yaml.safe_load(done.stdout)
    offline["metadata"]["name"] = "agent-app-offline"
    stored_offline = created(plane, offline)
    assert comparable(stored_offline) == comparable(stored), difference(stored, stored_offline)


# what the injector sets in an app container, per mode, as docs/kubernetes.md and docs/agent.md list it
INJECTED_ENV = {
    "sidecar": {
        "TOKENRELAY_SOCKET": "/var/run/tokenrelay/tokenrelay.sock",
        "TOKENRELAY_PROXY_URL": "http://127.0.0.1:8080",
    },
    "agent": {
        "TOKENRELAY_SOCKET": "/var/run/tokenrelay-agent/agent.sock",
        "TOKENRELAY_AGENT_TOKEN_FILE": "/var/run/secrets/tokenrelay/oidc-token",
        "TOKENRELAY_IDENTITY": AGENT_UID,
    },
}


@pytest.mark.parametrize("mode", sorted(INJECTED_ENV))
def test_a_variable_the_container_already_sets_to_the_injectors_value_is_kept_once(
    injector: Injector, mode: str
) -> None:
    """A container that already sets the injector's variables to the injector's values keeps its own
    entries, each once and in its order, through the webhook and through `tokenrelay inject` alike;
    a container without them gets each once."""
    plane = injector.plane
    where = f"own-env-{mode}"
    labels = {INJECT: "enabled", "pod-security.kubernetes.io/enforce": "privileged"}
    namespace(plane, where, labels, {"default"})
    pod = bare(f"own-env-{mode}", identity=AGENT_UID)
    if mode == "agent":
        pod = agent_mode(pod, pod["metadata"]["name"])
    else:
        pod["metadata"]["annotations"]["tokenrelay.dev/proxy"] = "on"
    own = [{"name": "LOG_LEVEL", "value": "info"}]
    own += [{"name": name, "value": value} for name, value in reversed(INJECTED_ENV[mode].items())]
    bystander = copy.deepcopy(pod["spec"]["containers"][0])
    bystander["name"] = "bystander"
    pod["spec"]["containers"][0]["env"] = own
    pod["spec"]["containers"].append(bystander)
    pod = in_namespace(pod, where)
    args = ["--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url, "--image", INJECTOR.image]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    done = subprocess.run(
        [cli(), "inject", *args], input=json.dumps(pod), capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    envs = {
        how: [container["env"] for container in result["spec"]["containers"]]
        for how, result in (("webhook", created(plane, pod)), ("inject", yaml.safe_load(done.stdout)))
    }
    added = [{"name": name, "value": value} for name, value in INJECTED_ENV[mode].items()]
    assert envs == {"webhook": [own, added], "inject": [own, added]}


@pytest.mark.parametrize(
    ("level", "admitted"), [("restricted", False), ("baseline", False), ("privileged", True)]
)
def test_what_pod_security_answers_to_an_agent_mode_pod(
    injector: Injector, level: str, admitted: bool
) -> None:
    """The real PodSecurity admission refuses an agent-mode pod at "restricted" and at "baseline" (both
    forbid hostPath volumes, docs/agent.md says so) and admits it at "privileged"; the refusal names
    the agent's volume."""
    plane = injector.plane
    where = f"agent-{level}"
    namespace(plane, where, {INJECT: "enabled", "pod-security.kubernetes.io/enforce": level}, {"default"})
    done = create(plane, in_namespace(agent_mode(FIXTURES["07-restricted"]["pod"], "app"), where))
    if admitted:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 1
    assert f'violates PodSecurity "{level}:latest": ' in done.stderr
    assert 'volume "tokenrelay-agent"' in done.stderr and "hostPath" in done.stderr


def test_agent_mode_with_the_proxy_is_refused_by_kubectl_naming_the_fix(injector: Injector) -> None:
    """A pod asking for agent mode and the proxy is refused through the chain: kubectl says the proxy
    needs the sidecar, and how to get it."""
    plane = injector.plane
    namespace(
        plane,
        "agent-proxy",
        {INJECT: "enabled", "pod-security.kubernetes.io/enforce": "privileged"},
        {"default"},
    )
    pod = agent_mode(FIXTURES["07-restricted"]["pod"], "with-proxy")
    pod["metadata"]["annotations"]["tokenrelay.dev/proxy"] = "on"
    done = create(plane, in_namespace(pod, "agent-proxy"))
    assert done.returncode == 1
    assert (
        "annotation tokenrelay.dev/proxy: on needs the sidecar (the node agent has no token-injecting "
        "proxy); remove it, or set tokenrelay.dev/mode: sidecar" in done.stderr
    )
