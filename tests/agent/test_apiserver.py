"""``tokenrelay agent`` against the real API server: who may ask, what the token service decides,
and the start-up taint removed through real RBAC."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tokenrelay.testing import jti

from .conftest import API, NAMESPACE, OTHER_NODE, STARTUP_TAINT, UNTRUSTING, Cluster, wait_for

pytestmark = pytest.mark.usefixtures("control_plane")


def _claims(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims


def _resign(cluster: Cluster, token: str, key: Any, **changes: Any) -> str:
    """``token``'s claims with ``changes``, signed with ``key`` under the real token's key id."""
    header = jwt.get_unverified_header(token)
    return jwt.encode({**_claims(token), **changes}, key, algorithm="ES256", headers={"kid": header["kid"]})


def _metric(cluster: Cluster, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(cluster.metrics + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def test_pods_of_one_service_account_share_one_exchange(cluster: Cluster) -> None:
    """Two pods of one service account on the node get the same token from one exchange, made with
    a pod's own token for the identity it named; another account gets its own."""
    cluster.pod("web-1", "alpha")
    cluster.pod("web-2", "alpha")
    cluster.pod("db-1", "beta")
    before = cluster.service.calls
    first = cluster.ask(cluster.token("web-1"))
    second = cluster.ask(cluster.token("web-2"))
    assert first.status == 200, first.body
    assert second.json()["token"] == first.json()["token"]
    assert first.json()["audience"] == API
    assert cluster.service.calls == before + 1
    assert cluster.service.seen_queries[-1] == {"aud": API, "identity": "alice"}
    assert _claims(cluster.service.seen_id_tokens[-1])["kubernetes.io"]["pod"]["name"] in ("web-1", "web-2")
    other = cluster.ask(cluster.token("db-1"))
    assert other.status == 200
    assert jti(other.json()["token"]) != jti(first.json()["token"])
    assert cluster.service.calls == before + 2
    assert _metric(cluster, "tokenrelay_agent_cache_lookups_total", result="hit") >= 1


def test_text_answer_carries_the_expiry(cluster: Cluster) -> None:
    """Accept: text/plain gets the bare token and Token-Expires-At, as from the sidecar."""
    cluster.pod("web-3", "alpha")
    reply = cluster.ask(cluster.token("web-3"), audience="registry.example", accept="text/plain")
    assert reply.status == 200
    assert _claims(reply.body.decode())["aud"] == "registry.example"
    assert reply.headers["token-expires-at"].isdigit()


def test_token_command_talks_to_the_agent_with_the_pods_token(cluster: Cluster) -> None:
    """`tokenrelay token` with TOKENRELAY_AGENT_TOKEN_FILE sends the file's token and the identity,
    and prints the agent's token; without an identity, the agent's refusal names TOKENRELAY_IDENTITY."""
    cluster.pod("cli-1", "alpha")
    token_file = cluster.directory / "cli-1.token"
    token_file.write_text(cluster.token("cli-1") + "\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "TOKENRELAY_SOCKET": cluster.socket,
        "TOKENRELAY_AGENT_TOKEN_FILE": str(token_file),
        "TOKENRELAY_IDENTITY": "alice",
    }
    command = [sys.executable, "-m", "tokenrelay", "token"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert _claims(done.stdout.strip())["aud"] == API
    del env["TOKENRELAY_IDENTITY"]
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1
    assert "TOKENRELAY_IDENTITY" in refused.stderr
    token_file.unlink()
    missing = subprocess.run(
        command, env={**env, "TOKENRELAY_IDENTITY": "alice"}, capture_output=True, text=True
    )
    assert missing.returncode == 1
    assert "TOKENRELAY_AGENT_TOKEN_FILE" in missing.stderr


def test_identity_the_service_refuses_is_refused_in_its_words(cluster: Cluster) -> None:
    """An identity that does not trust the service account: 403 with the service's own message and
    reason, and no other identity's token."""
    cluster.pod("web-4", "alpha")
    reply = cluster.ask(cluster.token("web-4"), identity=UNTRUSTING)
    assert reply.status == 403
    assert "identity untrusting does not trust this service account" in reply.message
    assert reply.reason == "IDENTITY_NOT_TRUSTED"
    assert "token" not in reply.json()
    assert cluster.ask(cluster.token("web-4"), identity=UNTRUSTING).status == 403


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("another node", "POD_TOKEN_NODE"),
        ("wrong audience", "POD_TOKEN_AUDIENCE"),
        ("forged", "POD_TOKEN_SIGNATURE"),
        ("wrong issuer", "POD_TOKEN_ISSUER"),
        ("second audience", "POD_TOKEN_AUDIENCE"),
        ("expired", "POD_TOKEN_EXPIRED"),
        ("not bound to a pod", "POD_TOKEN_CLAIMS"),
        ("no token", "POD_TOKEN_MISSING"),
        ("not a JWT", "POD_TOKEN_MALFORMED"),
    ],
)
def test_tokens_that_do_not_prove_a_pod_here_are_refused(cluster: Cluster, case: str, reason: str) -> None:
    """401 naming the check the pod's token failed, and no exchange for it (none for the identity
    asked for, unique to the case: the module's other keys may refresh meanwhile)."""
    from cryptography.hazmat.primitives import serialization

    if "web-5" not in cluster.pods:
        cluster.pod("web-5", "alpha")
        cluster.pod("far-1", "alpha", node=OTHER_NODE)
    real_key = serialization.load_pem_private_key((cluster.plane.pki / "sa.key").read_bytes(), None)
    good = cluster.token("web-5")
    makers: dict[str, Callable[[], str | None]] = {
        "another node": lambda: cluster.token("far-1"),
        "wrong audience": lambda: cluster.token("web-5", audience="https://elsewhere.example"),
        "forged": lambda: _resign(cluster, good, ec.generate_private_key(ec.SECP256R1())),
        "wrong issuer": lambda: _resign(cluster, good, real_key, iss="https://issuer.elsewhere.example"),
        "second audience": lambda: _resign(
            cluster, good, real_key, aud=[cluster.auth_url, "https://elsewhere.example"]
        ),
        "expired": lambda: _resign(cluster, good, real_key, exp=_claims(good)["iat"] - 60),
        "not bound to a pod": lambda: cluster.plane.token(NAMESPACE, "alpha", [cluster.auth_url]),
        "no token": lambda: None,
        "not a JWT": lambda: "not-a-jwt",
    }
    token = makers[case]()
    identity = "refused-" + case.replace(" ", "-")
    reply = cluster.ask(token, identity=identity)
    assert reply.status == 401, reply.body
    assert reply.reason == reason
    assert not [q for q in cluster.service.seen_queries if q.get("identity") == identity]
    if token:  # booleans, so that a failure does not print the token
        echoed, exchanged = token in reply.body.decode(), token in cluster.service.seen_id_tokens
        assert not echoed and not exchanged


def test_a_deleted_pods_token_is_refused(cluster: Cluster) -> None:
    """Once its pod is deleted, a token that still has an hour to live is refused."""
    cluster.pod("gone-1", "beta")
    token = cluster.token("gone-1")
    assert cluster.ask(token).status == 200
    cluster.plane.kubectl("delete", "pod", "gone-1", "-n", NAMESPACE, "--grace-period=0", "--force")
    wait_for(lambda: cluster.ask(token).status == 401, "the deleted pod's token to be refused")
    assert cluster.ask(token).reason == "POD_TOKEN_POD_GONE"


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pods_token_is_refused(cluster: Cluster, phase: str) -> None:
    """Once its pod has finished (its phase Succeeded or Failed, as kubelet reports it), a token that
    still has an hour to live is refused POD_TOKEN_POD_GONE, though the pod object remains."""
    name = f"job-{phase.lower()}"
    cluster.pod(name, "beta")
    token = cluster.token(name)
    assert cluster.ask(token).status == 200
    cluster.plane.kubectl(
        "patch", "pod", name, "-n", NAMESPACE, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": phase}}),
    )  # fmt: skip
    wait_for(lambda: cluster.ask(token).status == 401, f"the {phase} pod's token to be refused")
    assert cluster.ask(token).reason == "POD_TOKEN_POD_GONE"


def test_startup_taint_is_removed_through_real_rbac(cluster: Cluster) -> None:
    """The agent, under its own service account's RBAC, removes its node's start-up taint once ready,
    keeps every other taint, and leaves the other node's alone."""

    def taints(node: str) -> list[str]:
        return [t["key"] for t in cluster.plane.get("node", node)["spec"].get("taints", [])]

    wait_for(lambda: STARTUP_TAINT not in taints("node-a"), "the start-up taint to go")
    assert "example.com/keep-me" in taints("node-a")
    assert STARTUP_TAINT in taints(OTHER_NODE)
    with urllib.request.urlopen(cluster.metrics + "/readyz", timeout=10) as response:
        assert json.load(response) == {"status": "ready"}


def test_metrics_count_entries_lookups_exchanges_and_refusals(cluster: Cluster) -> None:
    """/metrics on --metrics-listen counts what the agent did: tokens held, hits and misses,
    exchanges, refusals by reason (the limiter's waits: tests/chaos/test_agent.py)."""
    cluster.pod("metrics-1", "alpha")
    token = cluster.token("metrics-1")
    missing = _metric(cluster, "tokenrelay_agent_refusals_total", reason="POD_TOKEN_MISSING")
    exchanges = _metric(cluster, "tokenrelay_agent_exchanges_total", result="success")
    misses = _metric(cluster, "tokenrelay_agent_cache_lookups_total", result="miss")
    hits = _metric(cluster, "tokenrelay_agent_cache_lookups_total", result="hit")
    assert cluster.ask(None).status == 401
    assert cluster.ask(token, identity="metrics-id").status == 200
    assert cluster.ask(token, identity="metrics-id").status == 200
    assert _metric(cluster, "tokenrelay_agent_refusals_total", reason="POD_TOKEN_MISSING") == missing + 1
    assert _metric(cluster, "tokenrelay_agent_exchanges_total", result="success") == exchanges + 1
    assert _metric(cluster, "tokenrelay_agent_cache_lookups_total", result="miss") == misses + 1
    assert _metric(cluster, "tokenrelay_agent_cache_lookups_total", result="hit") == hits + 1
    assert _metric(cluster, "tokenrelay_agent_cache_entries") >= 1
    assert _metric(cluster, "tokenrelay_agent_pods") >= 1


# `tokenrelay doctor` inside a pod in agent mode: the pod's token, the identity, the agent's socket,
# and a token asked of this module's real agent.


def doctor(cluster: Cluster, token: str | None, **env: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """`tokenrelay doctor --json` with the variables the injector sets in agent mode."""
    token_file = cluster.directory / "doctor.token"
    token_file.unlink(missing_ok=True)
    if token is not None:
        token_file.write_text(token + "\n")
    variables = {
        "PATH": "/usr/bin:/bin",
        "TOKENRELAY_SOCKET": cluster.socket,
        "TOKENRELAY_AGENT_TOKEN_FILE": str(token_file),
        "TOKENRELAY_IDENTITY": "alice",
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tokenrelay", "doctor", "--json"],
        env=variables,
        capture_output=True,
        text=True,
    )
    assert done.stderr == ""
    if token is not None:
        assert token not in done.stdout
    checks = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks


def test_doctor_passes_in_a_pod_the_agent_serves(cluster: Cluster) -> None:
    """With the pod's own projected token, the doctor's agent lines pass, the last one a token the
    agent really answered, and the settings checks of a sidecar are not run (the pod has none)."""
    cluster.pod("doctor-1", "alpha")
    status, checks = doctor(cluster, cluster.token("doctor-1"))
    agent = {k: c["status"] for k, c in checks.items() if k.startswith("agent.")}
    assert agent == {
        "agent.pod_token": "passed",
        "agent.identity": "passed",
        "agent.socket": "passed",
        "agent.token": "passed",
    }
    assert "pod agent-e2e/doctor-1" in checks["agent.pod_token"]["message"]
    assert not any(k.startswith(("config.", "sidecar.", "service.")) for k in checks)
    assert status == 0


def test_doctor_says_why_the_agent_refuses_and_what_to_do(cluster: Cluster) -> None:
    """A token of the wrong audience (an injector whose auth URL is not the agent's): the agent's
    refusal, and the fix naming the pod's audience, the injector's TOKENRELAY_AUTH_URL, the annotation
    and the agent's flag."""
    cluster.pod("doctor-2", "alpha")
    status, checks = doctor(cluster, cluster.token("doctor-2", audience="https://elsewhere.example"))
    assert status == 1
    token = checks["agent.token"]
    assert (token["status"], token["details"]["reason"]) == ("failed", "POD_TOKEN_AUDIENCE")
    assert "tokenrelay.dev/oidc-audience" in token["fix"] and "--pod-token-audience" in token["fix"]
    assert "the pod's token is for https://elsewhere.example" in token["fix"]
    assert "the injector's TOKENRELAY_AUTH_URL" in token["fix"]


def test_doctor_without_the_agent_or_the_token_names_the_fix(cluster: Cluster) -> None:
    """No socket (no agent on the node) and no token file: each line says what to do, and no request
    is tried."""
    status, checks = doctor(cluster, None, TOKENRELAY_SOCKET=str(cluster.directory / "none" / "agent.sock"))
    assert status == 1
    assert checks["agent.pod_token"]["status"] == "failed"
    assert "tokenrelay.dev/status: injected" in checks["agent.pod_token"]["fix"]
    assert checks["agent.socket"]["status"] == "failed"
    assert "kubectl -n tokenrelay-agent get pods" in checks["agent.socket"]["fix"]
    assert checks["agent.token"]["status"] == "skipped"


async def test_a_pod_finished_before_the_list_is_not_running(cluster: Cluster) -> None:
    """The pod watch's first list (at start-up, and after a broken watch) leaves out a pod that has
    already finished: its token is refused without a watch event to say so."""
    import asyncio

    from lightkube import AsyncClient
    from lightkube.config.kubeconfig import KubeConfig

    from tokenrelay.agent.pods import NodePods, watch

    done = cluster.pod("listed-done", "beta")
    live = cluster.pod("listed-live", "beta")
    cluster.plane.kubectl(
        "patch", "pod", "listed-done", "-n", NAMESPACE, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Succeeded"}}),
    )  # fmt: skip
    client = AsyncClient(config=KubeConfig.from_file(cluster.plane.kubeconfig).get())
    pods = NodePods()
    watching = asyncio.ensure_future(watch(client, "node-a", pods))
    try:
        await asyncio.wait_for(pods.listed.wait(), timeout=30.0)
        assert pods.running(live["metadata"]["uid"])
        assert not pods.running(done["metadata"]["uid"])
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await client.close()
