"""deploy/monitoring/: the alerts pass promtool's checks and unit tests, match the docs, and the
dashboard's queries parse and name metrics tokenrelay really exports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from tokenrelay.kube import mutation
from tokenrelay.kube.webhook import WebhookMetrics
from tokenrelay.sidecar.metrics import Metrics

from ..support.kube import REPO

MONITORING = REPO / "deploy" / "monitoring"
HERE = Path(__file__).parent


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed (Debian package prometheus), and CI is set")
        pytest.skip("promtool is not installed")
    return found


def groups() -> list[dict[str, Any]]:
    rule: dict[str, Any] = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    found: list[dict[str, Any]] = rule["spec"]["groups"]
    return found


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PrometheusRule's groups as a plain rules file, beside the promtool unit tests."""
    directory = tmp_path_factory.mktemp("rules")
    (directory / "rules.yaml").write_text(yaml.safe_dump({"groups": groups()}))
    shutil.copy(HERE / "alerts.test.yaml", directory / "alerts.test.yaml")
    return directory


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True)


def test_rules_pass_promtool_check(rules_dir: Path) -> None:
    """`promtool check rules` accepts every rule of the PrometheusRule."""
    done = run(["check", "rules", "rules.yaml"], rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 10 rules found" in done.stdout


def test_rules_pass_their_promtool_unit_tests(rules_dir: Path) -> None:
    """`promtool test rules`: each alert fires on the failing series (labels and annotations as
    expected) and stays quiet on the healthy ones."""
    done = run(["test", "rules", "alerts.test.yaml"], rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (HERE / "alerts.test.yaml").read_text()))
    assert tested == {r["alert"] for g in groups() for r in g["rules"]}


def test_sidecar_alerts_are_the_ones_docs_operations_md_suggests() -> None:
    """The PrometheusRule carries docs/operations.md's suggested alerts, with the same expressions."""
    docs = (REPO / "docs" / "operations.md").read_text()
    block = docs.split("### Suggested alerts", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    suggested = {r["alert"]: r for g in yaml.safe_load(block)["groups"] for r in g["rules"]}
    shipped = {r["alert"]: r for g in groups() for r in g["rules"]}

    def norm(expr: str) -> str:
        return " ".join(expr.split())

    for name, rule in suggested.items():
        assert norm(shipped[name]["expr"]) == norm(rule["expr"]), name
        assert shipped[name]["for"] == rule["for"], name
        assert shipped[name]["labels"]["severity"] == rule["labels"]["severity"], name


def exported_metrics() -> set[str]:
    """Every series name the sidecar and the webhook export (counters with _total, histograms _bucket)."""
    registry = CollectorRegistry()
    Metrics(registry, ["https://api.example.com"])
    WebhookMetrics(registry)
    names = set()
    for family in registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "histogram":
            names.add(family.name + "_bucket")
        if family.type == "counter":  # a labelled counter has no sample until a child exists
            names.add(family.name + "_total")
    return names


def test_dashboard_queries_parse_and_name_real_metrics(tmp_path: Path) -> None:
    """Every dashboard query is valid PromQL (promtool, Grafana's variables filled in) and every
    tokenrelay_* metric it names is one tokenrelay exports; so does every alert."""
    dashboard = json.loads((MONITORING / "tokenrelay-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 12
    filled = [e.replace("$__rate_interval", "5m").replace("$namespace", ".*") for e in exprs]
    records = [{"record": f"dashboard:query{i}", "expr": e} for i, e in enumerate(filled)]
    (tmp_path / "dashboard.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]})
    )
    done = run(["check", "rules", "dashboard.yaml"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    alert_exprs = [r["expr"] for g in groups() for r in g["rules"]]
    named = {m for e in [*exprs, *alert_exprs] for m in re.findall(r"\btokenrelay_[a-z_]+", e)}
    assert named - exported_metrics() == set()
    assert {"tokenrelay_webhook_admissions_total", "tokenrelay_token_expiry_timestamp_seconds"} <= named


def test_monitors_scrape_the_injected_sidecars_and_the_injector() -> None:
    """The PodMonitor scrapes the port name the injector gives the sidecar; the ServiceMonitor the
    injector Service's metrics port."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(MONITORING)], check=True, capture_output=True, text=True
    ).stdout
    docs = {d["kind"]: d for d in yaml.safe_load_all(out) if d}
    assert docs["PodMonitor"]["spec"]["podMetricsEndpoints"][0]["port"] == mutation.METRICS_PORT_NAME
    service = yaml.safe_load((REPO / "deploy" / "injector" / "base" / "service.yaml").read_text())
    monitor = docs["ServiceMonitor"]["spec"]
    assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert json.loads(docs["ConfigMap"]["data"]["tokenrelay-dashboard.json"])["uid"] == "tokenrelay"
