"""deploy/agent/startup-taint on a real API server: the agent's service account, with a pod's bound token
as the agent has it, may take taints off its own node and do nothing else to any node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..support.k8s import ControlPlane
from ..support.kube import render
from ..support.waiting import eventually_blocking

OWN, OTHER = "agent-policy-own", "agent-policy-other"
NAMESPACE = "tokenrelay-agent"
TAINT = {"key": "tokenrelay.dev/agent-not-ready", "effect": "NoSchedule"}
KEPT = {"key": "example.com/dedicated", "value": "batch", "effect": "NoSchedule"}
Doc = dict[str, Any]


def node(name: str) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": [TAINT, KEPT]},
    }


@pytest.fixture(scope="module")
def agent_kubeconfig(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The overlay's RBAC and policy installed, and a kubeconfig holding the bound token of an agent
    pod on node OWN: what the DaemonSet's pod authenticates with."""
    plane = control_plane
    kinds = {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    plane.apply([d for d in render(Path("deploy/agent/startup-taint")) if d["kind"] in kinds])
    for name in (OWN, OTHER):
        plane.ensure(node(name))
    pod = plane.ensure(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "agent-own", "namespace": NAMESPACE},
            "spec": {
                "serviceAccountName": "tokenrelay-agent",
                "automountServiceAccountToken": False,
                "nodeName": OWN,
                "containers": [{"name": "agent", "image": "registry.example/tokenrelay:1"}],
            },
        }
    )
    args = [
        "create", "token", "tokenrelay-agent", "-n", NAMESPACE, "--duration=1h",
        "--bound-object-kind", "Pod", "--bound-object-name", "agent-own",
        "--bound-object-uid", pod["metadata"]["uid"],
    ]  # fmt: skip
    token = plane.kubectl(*args).stdout.strip()
    config = plane.kubeconfig_for_token(token, tmp_path_factory.mktemp("agent-policy") / "kubeconfig")

    def denied() -> bool:  # the policy is in force once a dry run of a label change is refused
        patch = json.dumps({"metadata": {"labels": {"probe": "x"}}})
        done = plane.kubectl(
            "patch", "node", OWN, "-p", patch, "--dry-run=server", kubeconfig=config, check=False
        )
        return "may not change a node's labels" in done.stderr

    eventually_blocking(denied, "the ValidatingAdmissionPolicy to be in force", 60)
    return config


def untaint(plane: ControlPlane, name: str, config: Path) -> Any:
    patch = json.dumps([{"op": "replace", "path": "/spec/taints", "value": [KEPT]}])
    return plane.kubectl("patch", "node", name, "--type=json", "-p", patch, kubeconfig=config, check=False)


def test_the_agent_takes_its_taint_off_its_own_node(
    control_plane: ControlPlane, agent_kubeconfig: Path
) -> None:
    """With the startup-taint overlay, the agent's patch removing its taint from its own node is
    accepted, and the node keeps its other taints."""
    done = untaint(control_plane, OWN, agent_kubeconfig)
    assert done.returncode == 0, done.stderr
    assert control_plane.get("node", OWN)["spec"]["taints"] == [KEPT]


def test_the_agent_may_not_touch_another_node(control_plane: ControlPlane, agent_kubeconfig: Path) -> None:
    """RBAC lets the agent patch nodes; the overlay's policy refuses it every node but its own."""
    done = untaint(control_plane, OTHER, agent_kubeconfig)
    assert done.returncode == 1
    assert "the tokenrelay agent may change only the node it runs on" in done.stderr
    assert TAINT in control_plane.get("node", OTHER)["spec"]["taints"]


def test_the_agent_may_only_remove_taints(control_plane: ControlPlane, agent_kubeconfig: Path) -> None:
    """On its own node too, adding a taint or changing a label is refused."""
    plane = control_plane
    added = json.dumps(
        [{"op": "add", "path": "/spec/taints/-", "value": {"key": "x", "effect": "NoExecute"}}]
    )
    done = plane.kubectl(
        "patch", "node", OWN, "--type=json", "-p", added, kubeconfig=agent_kubeconfig, check=False
    )
    assert done.returncode == 1 and "the tokenrelay agent may only remove taints" in done.stderr
    labelled = json.dumps({"metadata": {"labels": {"role": "anything"}}})
    done = plane.kubectl("patch", "node", OWN, "-p", labelled, kubeconfig=agent_kubeconfig, check=False)
    assert done.returncode == 1 and "the tokenrelay agent may not change a node's labels" in done.stderr
