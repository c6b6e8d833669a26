"""deploy/agent/: the node agent's DaemonSet, its least-privilege RBAC, the start-up taint overlay,
and its alerts (promtool)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenrelay.agent.cluster import STARTUP_TAINT
from tokenrelay.kube import mutation, options

from ..support.kube import REPO, render, validate
from ..support.podsecurity import violations
from .test_monitoring import promtool

AGENT = Path("deploy/agent")
HERE = Path(__file__).parent
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Doc]]:
    return {name: render(AGENT / name) for name in ("base", "startup-taint", "monitoring")}


def one(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, (kind, name)
    return found[0]


def test_daemonset_runs_on_every_node_before_anything_else(rendered: dict[str, list[Doc]]) -> None:
    """The agent tolerates every taint (its own start-up taint included), runs at
    system-node-critical, and knows its node from spec.nodeName."""
    spec = one(rendered["base"], "DaemonSet")["spec"]["template"]["spec"]
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert spec["priorityClassName"] == "system-node-critical"
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["TOKENRELAY_NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_the_agent_is_restricted_but_for_its_host_directory(rendered: dict[str, list[Doc]]) -> None:
    """The agent container passes Pod Security "restricted"; the pod's only findings are the hostPath
    that pods mount and the init container that hands that directory to the agent's user (root
    with CHOWN alone, no escalation)."""
    spec = one(rendered["base"], "DaemonSet")["spec"]["template"]["spec"]
    agent_only = {**spec, "initContainers": []}
    assert [v for v in violations(agent_only) if "hostPath" not in v] == []
    assert any("hostPath" in v for v in violations(agent_only))
    volume = next(v for v in spec["volumes"] if "hostPath" in v)
    assert volume["hostPath"]["path"] == mutation.AGENT_DIR
    init = spec["initContainers"][0]["securityContext"]
    assert init["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert init["allowPrivilegeEscalation"] is False
    args = spec["containers"][0]["args"]
    assert f"--socket={mutation.AGENT_DIR}/agent.sock" in args
    for doc in rendered["base"]:
        validate(doc)


def test_rbac_reads_keys_and_pods_and_patches_nodes_only_with_the_taint(
    rendered: dict[str, list[Doc]],
) -> None:
    """The agent may read the issuer's discovery and keys and list/watch pods, nothing more; only the
    startup-taint overlay adds get/patch on nodes, the --startup-taint flag, and the admission
    policy that keeps the patch to the agent's own node."""
    rules = one(rendered["base"], "ClusterRole")["rules"]
    assert rules == [
        {"nonResourceURLs": ["/.well-known/openid-configuration", "/openid/v1/jwks"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ]
    assert not [d for d in rendered["base"] if d["kind"] == "ClusterRole" and "nodes" in str(d["rules"])]
    taint = rendered["startup-taint"]
    nodes = one(taint, "ClusterRole", "tokenrelay-agent-startup-taint")["rules"]
    assert nodes == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    assert "--startup-taint" in one(taint, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    policy = one(taint, "ValidatingAdmissionPolicy")
    assert (
        "system:serviceaccount:tokenrelay-agent:tokenrelay-agent"
        in policy["spec"]["matchConditions"][0]["expression"]
    )
    assert one(taint, "ValidatingAdmissionPolicyBinding")["spec"]["validationActions"] == ["Deny"]


def test_the_taint_is_the_one_the_agent_removes() -> None:
    """The taint the docs and manifests name is the one `tokenrelay agent --startup-taint` removes."""
    assert STARTUP_TAINT == options.AGENT_NOT_READY


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory: pytest.TempPathFactory, rendered: dict[str, list[Doc]]) -> Path:
    directory = tmp_path_factory.mktemp("agent-rules")
    rule = one(rendered["monitoring"], "PrometheusRule")
    (directory / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    shutil.copy(HERE / "agent-alerts.test.yaml", directory / "alerts.test.yaml")
    return directory


def test_agent_alerts_pass_promtool_and_their_unit_tests(
    rules_dir: Path, rendered: dict[str, list[Doc]]
) -> None:
    """`promtool check rules` and `promtool test rules`: every agent alert fires on its failing series
    and stays quiet on the healthy ones."""
    for args in (["check", "rules", "rules.yaml"], ["test", "rules", "alerts.test.yaml"]):
        done = subprocess.run([promtool(), *args], cwd=rules_dir, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (HERE / "agent-alerts.test.yaml").read_text()))
    rule = one(rendered["monitoring"], "PrometheusRule")
    assert tested == {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    monitor = one(rendered["monitoring"], "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "tokenrelay-agent"}
    assert (REPO / AGENT / "monitoring" / "podmonitor.yaml").exists()
