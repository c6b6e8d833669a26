"""`tokenrelay inject` run as a user runs it, on the repository's own deploy/ examples."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from ..support.kube import INJECTOR, REPO, cli, validate
from ..support.podsecurity import violations

EXAMPLE = REPO / "deploy" / "injector" / "example" / "app.yaml"
URLS = ["--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url]


def inject(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    return subprocess.run([cli(), "inject", *args], input=stdin, capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def injected() -> str:
    done = inject("-f", str(EXAMPLE), *URLS)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def templates(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for doc in docs:
        if doc["kind"] == "Deployment":
            out["Deployment"] = doc["spec"]["template"]
        elif doc["kind"] == "CronJob":
            out["CronJob"] = doc["spec"]["jobTemplate"]["spec"]["template"]
    return out


def test_example_is_injected_valid_and_still_restricted(injected: str) -> None:
    """The example's Deployment and CronJob get the sidecar; every document validates against
    1.29-1.32 and the pods still pass the restricted profile their namespace enforces."""
    docs = [d for d in yaml.safe_load_all(injected) if d]
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "Deployment", "Service", "CronJob"]
    for doc in docs:
        validate(doc)
    for kind, template in templates(docs).items():
        names = [c["name"] for c in template["spec"]["initContainers"]]
        assert names == ["tokenrelay"], kind
        assert violations(template["spec"]) == [], kind
        assert template["metadata"]["annotations"]["tokenrelay.dev/status"] == "injected"
    cron = templates(docs)["CronJob"]["spec"]["initContainers"][0]
    assert "--token-file=/var/run/tokenrelay/api-token" in cron["args"]


def test_other_documents_pass_through_byte_for_byte(injected: str) -> None:
    """The Namespace, ServiceAccount and Service come out as they went in, comments included."""
    chunks = EXAMPLE.read_text().split(
        "---\n"
    )  # comment+Namespace, ServiceAccount, Deployment, Service, CronJob
    assert injected.startswith(chunks[0] + "---\n" + chunks[1] + "---\n")
    assert "---\n" + chunks[3] + "---\n" in injected
    assert chunks[2] not in injected


def test_injecting_the_output_again_changes_nothing(injected: str) -> None:
    """Idempotent: `tokenrelay inject` on its own output (from stdin) writes the same bytes."""
    again = inject(*URLS, stdin=injected)
    assert again.returncode == 0, again.stderr
    assert again.stdout == injected


def test_identity_flag_serves_workloads_without_the_annotation() -> None:
    """--identity stands in for a missing tokenrelay.dev/identity; without either the refusal says so."""
    job = (REPO / "deploy" / "overlays" / "job" / "job.yaml").read_text()
    bare = yaml.safe_load(job)
    spec = bare["spec"]["template"]["spec"]
    del spec["initContainers"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "tokenrelay-socket"]
    spec["containers"][0].pop("env")
    spec["containers"][0]["volumeMounts"] = []
    text = yaml.safe_dump(bare)
    done = inject(*URLS, stdin=text)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "tokenrelay inject: Job/example-batch (document 1): no identity: add the annotation "
        "tokenrelay.dev/identity: <identity uid> to the pod template (or give tokenrelay inject --identity)\n"
    )
    done = inject(*URLS, "--identity", "example-org/batch", stdin=text)
    assert done.returncode == 0, done.stderr
    (job_out,) = yaml.safe_load_all(done.stdout)
    assert "--identity=example-org/batch" in job_out["spec"]["template"]["spec"]["initContainers"][0]["args"]


def test_hand_written_sidecar_of_deploy_base_is_refused_by_name() -> None:
    """deploy/base already carries a hand-written tokenrelay sidecar: inject refuses, naming every
    container, volume, port and mount that clashes, rather than adding a second sidecar."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    base = subprocess.run(
        [kubectl, "kustomize", str(REPO / "deploy" / "base")], check=True, capture_output=True, text=True
    )
    done = inject(*URLS, "--identity", "example-org/example-app", stdin=base.stdout)
    assert done.returncode == 1
    assert done.stderr == (
        "tokenrelay inject: Deployment/example-app (document 3): the pod already has a container "
        "named tokenrelay (in initContainers); rename it, or remove a hand-written tokenrelay sidecar "
        "and let the injector add it; the pod already has a volume named tokenrelay-socket; rename "
        "it; container tokenrelay already uses port 9090; set the annotation "
        "tokenrelay.dev/metrics-port to a free port; container app already mounts tokenrelay-socket "
        "at /var/run/tokenrelay, where the injector mounts the socket; move that mount\n"
    )


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (
            ["--api-url", "https://api.example.com"],
            "",
            "--auth-url (env TOKENRELAY_AUTH_URL) is required: Token service base URL the sidecars use "
            "(their --auth-url; also the default audience of the projected token).",
        ),
        (
            [*URLS, "--kube-version", "latest"],
            "",
            "--kube-version (env TOKENRELAY_KUBE_VERSION): 'latest' is not a version such as 1.30",
        ),
        (
            ["--auth-url", "auth.example.com", "--api-url", "https://api.example.com"],
            "",
            "--auth-url (env TOKENRELAY_AUTH_URL): 'auth.example.com' is not an http:// or https:// URL "
            "(from --auth-url)",
        ),
        (
            [*URLS, "-f", "/nonexistent/app.yaml"],
            "",
            "-f/--filename: cannot read /nonexistent/app.yaml: [Errno 2] No such file or directory: "
            "'/nonexistent/app.yaml'",
        ),
        ([*URLS], "kind: [unclosed", None),
    ],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], stdin: str, message: str | None) -> None:
    """Bad flags, an unreadable file or YAML that does not parse: exit 2 and one line naming what to fix."""
    done = inject(*args, stdin=stdin)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    if message is None:
        assert done.stderr.startswith("tokenrelay inject: document 1 is not YAML: ")
    else:
        assert done.stderr == f"tokenrelay inject: {message}\n"


def test_an_old_cluster_is_refused() -> None:
    """--kube-version 1.28 refuses every workload: native sidecars need 1.29."""
    done = inject("-f", str(EXAMPLE), *URLS, "--kube-version", "v1.28.9")
    assert done.returncode == 1
    assert "needs Kubernetes 1.29 or later; this cluster is 1.28" in done.stderr
