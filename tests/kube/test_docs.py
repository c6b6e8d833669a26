"""docs/kubernetes.md stays true to the code: annotations, flags, metrics and alerts."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from tokenrelay import docgen
from tokenrelay.kube import inject, options, webhook

from ..support.kube import REPO

DOC = (REPO / "docs" / "kubernetes.md").read_text()


def flags(add_arguments: Callable[[argparse.ArgumentParser], None]) -> set[str]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return {s for action in parser._actions for s in action.option_strings if s.startswith("--")} - {"--help"}


def test_every_annotation_is_documented_and_every_documented_one_exists() -> None:
    """The annotation table names each tokenrelay.dev/ annotation the code reads, and no other."""
    for name in [*options.ANNOTATIONS, options.STATUS]:
        assert f"`{name}`" in DOC, name
    named = set(re.findall(r"`(tokenrelay\.dev/[a-z-]+)", DOC))
    assert named - {options.INJECT_LABEL} <= set(options.ANNOTATIONS) | {options.STATUS}


def test_the_generated_tables_are_up_to_date() -> None:
    """The annotation and flag tables of the page are exactly what the code's tables give today."""
    assert docgen.main(["--check", str(REPO / "docs" / "kubernetes.md")]) == 0, (
        "run: python -m tokenrelay.docgen --write docs/kubernetes.md"
    )


def test_a_stale_annotation_table_is_caught(tmp_path: Path) -> None:
    """docgen --check fails when a default in the page's annotation table differs from the code's."""
    stale = tmp_path / "kubernetes.md"
    stale.write_text(
        DOC.replace("| `tokenrelay.dev/proxy-port` | `8080` |", "| `tokenrelay.dev/proxy-port` | `8081` |")
    )
    assert stale.read_text() != DOC
    assert docgen.main(["--check", str(stale)]) == 1


def test_the_annotation_table_and_pod_options_agree() -> None:
    """Each row of the annotation table fills one PodOptions field, in order, and a pod that names
    only its identity gets every row's default, which the page's table shows."""
    fields = dataclasses.fields(options.PodOptions)
    assert [row.field for row in options.TABLE] == [field.name for field in fields]
    for row, field in zip(options.TABLE[1:], fields[1:], strict=True):
        assert field.default == row.default, row.name
    parsed = options.parse({options.IDENTITY: "uid"})
    assert parsed == options.PodOptions(identity="uid")
    for row in options.TABLE:
        assert f"| `{row.name}` | {row.default_cell()} |" in DOC, row.name
    assert "| `tokenrelay.dev/proxy-port` | `8080` |" in DOC
    assert "| `tokenrelay.dev/memory-limit` | `128Mi` |" in DOC


def test_every_flag_of_inject_and_webhook_is_documented() -> None:
    """Each flag of `tokenrelay inject` and `tokenrelay webhook` appears in the page."""
    for flag in flags(inject.add_arguments) | flags(webhook.add_arguments):
        assert f"`{flag}" in DOC or f", `{flag}" in DOC, flag


def test_webhook_metrics_and_injector_alerts_are_documented() -> None:
    """The metrics table lists the webhook's metrics, and the alerts table the injector's alerts."""
    metrics = webhook.WebhookMetrics(CollectorRegistry())
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{name}`" in DOC, name
    rule = yaml.safe_load((REPO / "deploy" / "monitoring" / "prometheusrule.yaml").read_text())
    (group,) = [g for g in rule["spec"]["groups"] if g["name"] == "tokenrelay-injector"]
    for alert in group["rules"]:
        assert f"`{alert['alert']}`" in DOC, alert["alert"]


def test_readme_links_the_page() -> None:
    """README.md links docs/kubernetes.md."""
    assert "(docs/kubernetes.md)" in (REPO / "README.md").read_text()


def test_placement_of_the_replicas_is_described_as_the_deployment_asks_it() -> None:
    """The injector's anti-affinity is only preferred, and the page never promises that the two
    replicas are spread across nodes."""
    deployment = yaml.safe_load((REPO / "deploy" / "injector" / "base" / "deployment.yaml").read_text())
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert set(anti) == {"preferredDuringSchedulingIgnoredDuringExecution"}
    text = " ".join(DOC.split())
    assert "spread across nodes" not in text
    assert "preferred" in text


def test_istio_advice_renames_the_configuration_through_the_component() -> None:
    """The page sends Istio users to components/first, which renames the configuration everywhere,
    rather than telling them to rename the object alone (which breaks self-signed mode)."""
    assert (REPO / "deploy" / "injector" / "components" / "first" / "kustomization.yaml").is_file()
    text = " ".join(DOC.split())
    assert "deploy/injector/components/first" in text
    assert "rename the configuration, e.g." not in text


def test_the_variables_that_find_the_api_server_are_documented() -> None:
    """Every variable tests/support/k8s.py reads to find kube-apiserver and etcd is in the page's
    "How this is tested", and the page names no other."""
    source = (REPO / "tests" / "support" / "k8s.py").read_text()
    read = set(re.findall(r'os\.environ\.get\("([A-Z0-9_]+)"', source)) - {"CI"}
    assert read == {"KUBEBUILDER_ASSETS", "TOKENRELAY_K8S_SHARED", "ETCD"}
    section = DOC[DOC.index("## How this is tested") :]
    for variable in read:
        assert f"`{variable}`" in section, variable
