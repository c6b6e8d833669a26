"""`tokenrelay webhook --cert-secret` against a real API server, as deploy/injector/self-signed installs it.

The overlay is applied as rendered; the webhook runs as its own ServiceAccount, with a token from the
real TokenRequest API, so only the RBAC that deploy/ grants lets it fill the Secret and the caBundle.
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tokenrelay.kube import mutation

from ..support.k8s import ControlPlane
from ..support.kube import FIXTURES, RunningWebhook, patched, render, review, start_webhook

NAMESPACE, ACCOUNT, SECRET, CONFIGURATION = (
    "tokenrelay-system",
    "tokenrelay-injector",
    "tokenrelay-injector-tls",
    "tokenrelay-injector",
)
HOST = f"tokenrelay-injector.{NAMESPACE}.svc"
Doc = dict[str, Any]


@dataclass
class Installed:
    plane: ControlPlane
    webhook: RunningWebhook
    before: Doc  # the MutatingWebhookConfiguration as stored before the webhook started
    kubeconfig: Path  # the ServiceAccount's


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    docs = render(Path("deploy") / "injector" / "self-signed")
    control_plane.apply(docs)
    before = control_plane.get("mutatingwebhookconfiguration", CONFIGURATION)
    directory = tmp_path_factory.mktemp("selfsigned")
    token = control_plane.token(NAMESPACE, ACCOUNT)
    kubeconfig = control_plane.kubeconfig_for_token(token, directory / "kubeconfig")
    env = {k: v for k, v in control_plane.env(kubeconfig).items() if not k.startswith("TOKENRELAY_")}
    try:
        webhook = start_webhook(directory / "tls", "--cert-secret", SECRET, env=env)
        try:
            yield Installed(control_plane, webhook, before, kubeconfig)
        finally:
            assert webhook.stop() == 0
    finally:
        # failurePolicy Fail towards a Service with no endpoints: it would refuse later tests' pods
        control_plane.kubectl("delete", "mutatingwebhookconfiguration", CONFIGURATION, check=False)


def secret_data(plane: ControlPlane) -> dict[str, bytes]:
    stored = plane.get("secret", SECRET, NAMESPACE)
    return {key: base64.b64decode(value) for key, value in stored.get("data", {}).items()}


def test_the_webhook_fills_the_secret_and_the_ca_bundle_under_deploys_rbac(installed: Installed) -> None:
    """Run as its ServiceAccount, the webhook stores its CA and serving certificate in the Secret the
    install created empty, and puts that CA in both webhooks' caBundle; nothing else of the stored
    configuration changes."""
    data = secret_data(installed.plane)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    after = installed.plane.get("mutatingwebhookconfiguration", CONFIGURATION)
    bundles = [base64.b64decode(h["clientConfig"].pop("caBundle")) for h in after["webhooks"]]
    assert bundles == [data["ca.crt"]] * 2
    for stored in (installed.before, after):
        for key in ("resourceVersion", "generation", "managedFields"):
            stored["metadata"].pop(key, None)
    assert after == installed.before


async def test_what_it_serves_is_trusted_through_the_bundle_it_published(installed: Installed) -> None:
    """A client trusting only the published caBundle, checking the Service's name as the API server does,
    gets the webhook's answers: it learned the cluster's version (1.36) and so injects."""
    bundle = installed.plane.get("mutatingwebhookconfiguration", CONFIGURATION)["webhooks"][0]
    tls = ssl.create_default_context(cadata=base64.b64decode(bundle["clientConfig"]["caBundle"]).decode())
    url = installed.webhook.listen("webhook serving")
    body = review(copy.deepcopy(FIXTURES["12-bare"]["pod"]), "sandbox")
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json=body, ssl=tls, server_hostname=HOST) as response:
            answer = await response.json()
        async with session.get(url.replace("/mutate", "/readyz"), ssl=tls, server_hostname=HOST) as response:
            assert response.status == 200, await response.text()
    versions = [r["version"] for r in installed.webhook.records if r["msg"] == "cluster version"]
    assert versions == ["1.36"]
    pod = patched(body["request"]["object"], answer)
    assert [c["name"] for c in pod["spec"]["initContainers"]] == [mutation.CONTAINER]


@pytest.mark.parametrize(
    ("verb", "what", "allowed"),
    [
        ("get", f"secret/{SECRET}", True),
        ("update", f"secret/{SECRET}", True),
        ("get", "secret/another", False),
        ("create", "secrets", False),
        ("delete", f"secret/{SECRET}", False),
        ("patch", f"mutatingwebhookconfiguration/{CONFIGURATION}", True),
        ("patch", "mutatingwebhookconfiguration/another", False),
        ("list", "pods", False),
    ],
)
def test_the_service_account_may_do_nothing_else(
    installed: Installed, verb: str, what: str, allowed: bool
) -> None:
    """With the token the webhook runs with, the API server's RBAC allows get/update of its one Secret
    and get/patch of its one configuration, and refuses everything else."""
    done = installed.plane.kubectl(
        "auth", "can-i", verb, what, "-n", NAMESPACE, kubeconfig=installed.kubeconfig, check=False
    )
    assert done.stdout.strip() == ("yes" if allowed else "no"), done.stderr


def test_the_token_is_a_bound_service_account_token(installed: Installed) -> None:
    """The webhook authenticated as system:serviceaccount:tokenrelay-system:tokenrelay-injector."""
    done = installed.plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=installed.kubeconfig)
    user = json.loads(done.stdout)["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
