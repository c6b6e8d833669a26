"""The webhook's answer on real-shaped pods: additive, schema-valid, restricted-safe, idempotent."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
import yaml

from tokenrelay.kube import admission, inject, mutation
from tokenrelay.sidecar.settings import parse_args

from ..support.kube import (
    FIXTURES,
    INJECTOR,
    ops_of,
    patched,
    sidecar,
    strip_injection,
    validate,
    webhook,
    without,
)
from ..support.podsecurity import violations

INJECTABLE = [name for name, f in FIXTURES.items() if not f.get("injected")]


@pytest.fixture(scope="module")
def answers() -> dict[str, tuple[dict[str, Any], dict[str, Any], str]]:
    """Each fixture's pod, the pod with the webhook's patch applied, and the admission result."""
    out = {}
    for name, fixture in FIXTURES.items():
        pod = fixture["pod"]
        response, result = webhook(copy.deepcopy(pod), fixture["namespace"])
        out[name] = (pod, patched(pod, response) if result == admission.INJECTED else pod, result)
    return out


def test_there_are_a_dozen_real_world_pods() -> None:
    """The fixtures cover at least a dozen injectable pods of distinct real-world shapes."""
    assert len(INJECTABLE) >= 12


@pytest.mark.parametrize("name", INJECTABLE)
def test_patch_only_adds_and_keeps_everything(name: str, answers: dict[str, Any]) -> None:
    """Every operation is an add, and removing what was added gives back the pod exactly as it came."""
    pod, result_pod, result = answers[name]
    assert result == admission.INJECTED
    response, _ = webhook(copy.deepcopy(pod), FIXTURES[name]["namespace"])
    assert {op["op"] for op in ops_of(response)} == {"add"}
    assert strip_injection(result_pod) == pod


@pytest.mark.parametrize("name", INJECTABLE)
def test_patched_pod_passes_the_1_29_to_1_32_schemas(name: str, answers: dict[str, Any]) -> None:
    """The injected pod validates strictly against Kubernetes 1.29-1.32; fields newer than those
    schemas are carried through unchanged."""
    pod, result_pod, _ = answers[name]
    newer = FIXTURES[name].get("newerThanSchema", [])
    for pointer in newer:
        path = [int(p) if p.isdigit() else p for p in pointer.split("/")[1:]]
        before: Any = pod
        after: Any = result_pod
        for part in path:
            before, after = before[part], after[part]
        assert after == before
    validate(without(result_pod, newer))


@pytest.mark.parametrize("name", INJECTABLE)
def test_restricted_pods_stay_restricted(name: str, answers: dict[str, Any]) -> None:
    """A pod passing Pod Security "restricted" still does once injected; the sidecar passes it anywhere."""
    pod, result_pod, _ = answers[name]
    if FIXTURES[name].get("restricted"):
        assert violations(pod["spec"]) == []
    if not violations(pod["spec"]):
        assert violations(result_pod["spec"]) == []
    assert violations({"containers": [sidecar(result_pod)]}) == []


@pytest.mark.parametrize("name", INJECTABLE)
def test_sidecar_runs_tokenrelay_run_wired_to_the_pod(name: str, answers: dict[str, Any]) -> None:
    """The sidecar's args are a valid `tokenrelay run` command line whose socket, OIDC token file and
    probe port match the volumes, mounts, env and probes the patch added."""
    _, result_pod, _ = answers[name]
    relay = sidecar(result_pod)
    assert relay["restartPolicy"] == "Always"
    settings = parse_args(relay["args"], {})
    assert settings.identity == result_pod["metadata"]["annotations"]["tokenrelay.dev/identity"]
    assert settings.metrics_listen is not None
    port = settings.metrics_listen[1]
    assert relay["startupProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert relay["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}
    mounts = {m["name"]: m["mountPath"] for m in relay["volumeMounts"]}
    volumes = {v["name"]: v for v in result_pod["spec"]["volumes"]}
    token = volumes[mutation.TOKEN_VOLUME]["projected"]["sources"][0]["serviceAccountToken"]
    assert settings.id_token_file == f"{mounts[mutation.TOKEN_VOLUME]}/{token['path']}"
    assert token["expirationSeconds"] >= 600
    assert volumes[mutation.SOCKET_VOLUME]["emptyDir"]["medium"] == "Memory"
    assert settings.socket.startswith(mounts[mutation.SOCKET_VOLUME] + "/")
    index = result_pod["spec"]["initContainers"].index(relay)
    for container in [*result_pod["spec"]["initContainers"][index + 1 :], *result_pod["spec"]["containers"]]:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[mutation.SOCKET_ENV] == settings.socket
        if settings.proxy_listen:
            assert env[mutation.PROXY_ENV] == f"http://127.0.0.1:{settings.proxy_listen[1]}"
        assert {
            "name": mutation.SOCKET_VOLUME,
            "mountPath": mounts[mutation.SOCKET_VOLUME],
            "readOnly": True,
        } in (container["volumeMounts"])
    for container in result_pod["spec"]["initContainers"][:index]:
        assert mutation.SOCKET_ENV not in {e["name"] for e in container.get("env", [])}


@pytest.mark.parametrize(
    ("name", "index"), [("02-native-sidecars", 2), ("03-istio-native", 2), ("09-linkerd", 2), ("12-bare", 0)]
)
def test_sidecar_goes_after_existing_native_sidecars(name: str, index: int, answers: dict[str, Any]) -> None:
    """tokenrelay starts after a mesh proxy or log shipper already there, before ordinary init containers
    that come after them (which may need the token)."""
    _, result_pod, _ = answers[name]
    names = [c["name"] for c in result_pod["spec"]["initContainers"]]
    assert names.index("tokenrelay") == index


def test_socket_access_follows_the_app_users(answers: dict[str, Any]) -> None:
    """One shared uid keeps the 0600 socket; other or unknown users get 0666 on the pod-private volume."""
    shared = sidecar(answers["04-volumes-and-env"][1])
    assert shared["securityContext"]["runAsUser"] == 1000
    assert not any(a.startswith("--socket-mode") for a in shared["args"])
    assert "--token-file=/var/run/tokenrelay/registry-token=registry.example.com" in shared["args"]
    mixed = sidecar(answers["10-mixed-users"][1])
    assert "--socket-mode=0666" in mixed["args"]
    assert not any(a.startswith("--socket-allow-uid") for a in mixed["args"])
    vault = sidecar(answers["11-vault-agent"][1])  # uids 100 and unknown
    assert vault["image"] == "registry.example.com/mirror/tokenrelay:0.1.0"
    assert vault["resources"] == {
        "requests": {"cpu": "10m", "memory": "64Mi"},
        "limits": {"cpu": "500m", "memory": "128Mi"},
    }


def test_projected_token_follows_the_annotations(answers: dict[str, Any]) -> None:
    """The projected token's audience defaults to the auth URL; the annotations set audience and life."""

    def projection(name: str) -> dict[str, Any]:
        volumes = {v["name"]: v for v in answers[name][1]["spec"]["volumes"]}
        token: dict[str, Any] = volumes[mutation.TOKEN_VOLUME]["projected"]["sources"][0][
            "serviceAccountToken"
        ]
        return token

    assert projection("12-bare") == {
        "audience": INJECTOR.auth_url,
        "expirationSeconds": 600,
        "path": "oidc-token",
    }
    assert projection("13-statefulset-pod") == {
        "audience": "sts.example.com",
        "expirationSeconds": 3600,
        "path": "oidc-token",
    }


def test_already_injected_pod_gets_no_patch(answers: dict[str, Any]) -> None:
    """A pod marked tokenrelay.dev/status: injected is allowed with no patch at all."""
    response, result = webhook(FIXTURES["14-already-injected"]["pod"])
    assert result == admission.ALREADY
    assert response["response"] == {"uid": response["response"]["uid"], "allowed": True}


@pytest.mark.parametrize("name", INJECTABLE)
def test_webhook_then_inject_and_webhook_again_change_nothing(name: str, answers: dict[str, Any]) -> None:
    """Idempotent: the webhook on its own output answers no patch; `inject` writes it back byte for byte."""
    _, result_pod, _ = answers[name]
    response, result = webhook(copy.deepcopy(result_pod), FIXTURES[name]["namespace"])
    assert result == admission.ALREADY
    assert "patch" not in response["response"]
    text = yaml.safe_dump(result_pod, sort_keys=False)
    out, err = io.StringIO(), io.StringIO()
    assert inject.inject_text(text, INJECTOR, None, out, err) == 0
    assert out.getvalue() == text


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"])
def test_inject_then_webhook_changes_nothing_and_matches(kind: str, answers: dict[str, Any]) -> None:
    """`inject` on a workload gives its template exactly what the webhook gives the pod, and a pod made
    from the injected template passes the webhook untouched."""
    pod, result_pod, _ = answers["03-istio-native"]
    template = {"metadata": copy.deepcopy(pod["metadata"]), "spec": copy.deepcopy(pod["spec"])}
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "cart"}}, "template": template}
    if kind == "CronJob":
        spec = {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}
    elif kind == "Job":
        spec = {"template": template}
    group = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    workload = {"apiVersion": group, "kind": kind, "metadata": {"name": "cart"}, "spec": spec}
    out, err = io.StringIO(), io.StringIO()
    assert inject.inject_text(yaml.safe_dump(workload), INJECTOR, None, out, err) == 0, err.getvalue()
    injected = yaml.safe_load(out.getvalue())
    got = (
        injected["spec"]["jobTemplate"]["spec"]["template"]
        if kind == "CronJob"
        else injected["spec"]["template"]
    )
    assert got == {"metadata": result_pod["metadata"], "spec": result_pod["spec"]}
    new_pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(got)}
    assert webhook(new_pod, "shop")[1] == admission.ALREADY


def test_opted_out_pod_and_excluded_namespaces_are_left_alone() -> None:
    """tokenrelay.dev/inject: disabled on the pod, or a pod of kube-system, is allowed untouched."""
    pod = copy.deepcopy(FIXTURES["12-bare"]["pod"])
    pod["metadata"]["labels"]["tokenrelay.dev/inject"] = "disabled"
    assert webhook(pod)[1] == admission.OPTED_OUT
    bare = FIXTURES["12-bare"]["pod"]
    from ..support.kube import review

    response, result = admission.answer(
        review(bare, "kube-system"), INJECTOR, {"kube-system", "tokenrelay-system"}
    )
    assert result == admission.EXCLUDED
    assert "patch" not in response["response"]


def test_non_pod_and_non_create_requests_are_ignored() -> None:
    """An UPDATE, or another kind, is allowed with no patch (the webhook should not even be called)."""
    from ..support.kube import review

    body = review(FIXTURES["12-bare"]["pod"], "sandbox")
    body["request"]["operation"] = "UPDATE"
    assert admission.answer(body, INJECTOR)[1] == admission.IGNORED
    body["request"]["operation"] = "CREATE"
    body["request"]["kind"]["kind"] = "Deployment"
    assert admission.answer(body, INJECTOR)[1] == admission.IGNORED


def test_a_list_from_kubectl_get_is_injected_item_by_item() -> None:
    """`kubectl get -o yaml` output (kind: List) gets each pod-bearing item injected, others untouched."""
    pod = copy.deepcopy(FIXTURES["12-bare"]["pod"])
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    listed = {"apiVersion": "v1", "kind": "List", "items": [config_map, pod]}
    out, err = io.StringIO(), io.StringIO()
    assert inject.inject_text(yaml.safe_dump(listed), INJECTOR, None, out, err) == 0, err.getvalue()
    items = yaml.safe_load(out.getvalue())["items"]
    assert items[0] == config_map
    assert [c["name"] for c in items[1]["spec"]["initContainers"]] == ["tokenrelay"]


def test_a_template_without_annotations_gets_them_created() -> None:
    """A template with labels but no annotations map (identity from --identity) gets the map added."""
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "x", "image": "x"}]},
    }
    result = mutation.mutate(template, INJECTOR, identity="org/x")
    document = copy.deepcopy(template)
    mutation.apply(document, result.ops)
    assert document["metadata"] == {
        "labels": {"app": "x"},
        "annotations": {"tokenrelay.dev/status": "injected"},
    }
    assert mutation.mutate(document, INJECTOR, identity="org/x").ops == []
