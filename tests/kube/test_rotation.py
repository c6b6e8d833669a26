"""The self-issued certificate on a fake clock: issued, rotated and published through the real API server;
a fake API server only for what a real one cannot show (a lost race at a chosen moment, an outage, an
old version)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from cryptography import x509
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from prometheus_client import CollectorRegistry

from tokenrelay.kube import certs, webhook
from tokenrelay.kube.rotation import Rotator
from tokenrelay.testing import FakeClock

from ..support.k8s import ControlPlane
from ..support.kube import INJECTOR, render
from ..support.kubeapi import CONFIGURATION, NAMESPACE, SECRET, FakeApi, configuration, kubeconfig

DAY = 86400.0
DNS = ["tokenrelay-injector.tokenrelay-system.svc", "tokenrelay-injector.tokenrelay-system.svc.cluster.local"]
# Short lives so that a test walks through several CA and leaf generations in a few hundred rounds.
POLICY = certs.Policy(ca_lifetime=30 * DAY, leaf_lifetime=6 * DAY, propagation=DAY)


@dataclass
class Cluster:
    api: FakeApi
    client: AsyncClient
    clock: FakeClock
    server: str

    def rotator(self, tls_dir: Path, on_files: Callable[[], None] = lambda: None) -> Rotator:
        return Rotator(
            self.client,
            namespace=NAMESPACE,
            secret=SECRET,
            webhook_configuration=CONFIGURATION,
            dns_names=DNS,
            tls_dir=tls_dir,
            policy=POLICY,
            wall=self.clock.wall,
            on_files=on_files,
        )

    def bundles(self) -> list[list[x509.Certificate]]:
        """Each webhook's caBundle, as the API server would use it."""
        hooks = self.api.configurations[CONFIGURATION]["webhooks"]
        return [
            x509.load_pem_x509_certificates(base64.b64decode(h["clientConfig"]["caBundle"])) for h in hooks
        ]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    api = FakeApi(NAMESPACE, SECRET, configuration())
    server = TestServer(api.app(), host="127.0.0.1")
    await server.start_server()
    url = str(server.make_url("")).rstrip("/")
    client = AsyncClient(config=KubeConfig.from_dict(kubeconfig(url)), trust_env=False)
    try:
        yield Cluster(api, client, FakeClock(wall_start=1_800_000_000.0), url)
    finally:
        await client.close()
        await server.close()


def served(tls_dir: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate((tls_dir / certs.TLS_CERT).read_bytes())


@dataclass
class RealCluster:
    """The real API server holding a Secret and a MutatingWebhookConfiguration for a Rotator."""

    plane: ControlPlane
    client: AsyncClient
    clock: FakeClock
    configuration: dict[str, Any]  # as stored before any rotation

    def rotator(self, tls_dir: Path, on_files: Callable[[], None] = lambda: None) -> Rotator:
        return Rotator(
            self.client,
            namespace=REAL_NAMESPACE,
            secret=SECRET,
            webhook_configuration=REAL_CONFIGURATION,
            dns_names=DNS,
            tls_dir=tls_dir,
            policy=POLICY,
            wall=self.clock.wall,
            on_files=on_files,
        )

    async def stored_configuration(self) -> dict[str, Any]:
        from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration

        found = await self.client.get(MutatingWebhookConfiguration, REAL_CONFIGURATION)
        stored: dict[str, Any] = found.to_dict()
        return stored

    async def bundles(self) -> list[list[x509.Certificate]]:
        return _bundles(await self.stored_configuration())

    def bundles_now(self) -> list[list[x509.Certificate]]:
        from lightkube import Client
        from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration

        with closing(Client(config=KubeConfig.from_file(self.plane.kubeconfig), trust_env=False)) as client:
            return _bundles(client.get(MutatingWebhookConfiguration, REAL_CONFIGURATION).to_dict())


def _bundles(configuration: dict[str, Any]) -> list[list[x509.Certificate]]:
    hooks = configuration["webhooks"]
    return [x509.load_pem_x509_certificates(base64.b64decode(h["clientConfig"]["caBundle"])) for h in hooks]


REAL_NAMESPACE, REAL_CONFIGURATION = "rotation", "rotation-test"


@pytest.fixture
async def real_cluster(control_plane: ControlPlane) -> AsyncIterator[RealCluster]:
    """deploy/'s MutatingWebhookConfiguration under another name, selecting no namespace (so it is never
    called), and the empty Secret, on the real API server."""
    (configuration,) = [
        d
        for d in render(Path("deploy") / "injector" / "self-signed")
        if d["kind"] == "MutatingWebhookConfiguration"
    ]
    configuration["metadata"]["name"] = REAL_CONFIGURATION
    for hook in configuration["webhooks"]:
        hook["namespaceSelector"] = {"matchLabels": {"tokenrelay.dev/rotation-test": "never"}}
    control_plane.kubectl("delete", "mutatingwebhookconfiguration", REAL_CONFIGURATION, check=False)
    # (a namespace is never deleted here: without the controller-manager it would stay Terminating)
    control_plane.kubectl("delete", "secret", SECRET, "-n", REAL_NAMESPACE, "--ignore-not-found", check=False)
    metadata = {"name": SECRET, "namespace": REAL_NAMESPACE}
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": REAL_NAMESPACE}}
    control_plane.apply([namespace, configuration, secret])
    client = AsyncClient(config=KubeConfig.from_file(control_plane.kubeconfig), trust_env=False)
    try:
        cluster = RealCluster(control_plane, client, FakeClock(wall_start=1_800_000_000.0), {})
        cluster.configuration = await cluster.stored_configuration()
        yield cluster
    finally:
        await client.close()
        control_plane.kubectl("delete", "mutatingwebhookconfiguration", REAL_CONFIGURATION, check=False)


async def test_two_replicas_keep_a_trusted_certificate_through_years_of_rotation(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    """Against the real API server, over 70 daily rounds by two replicas (CA life 30 days, leaf 6), every
    certificate is in the caBundle before it is served, no served certificate is ever untrusted or near
    expiry, CAs and leaves rotate, expired CAs leave the bundle, and nothing of the configuration but
    the caBundles ever changes."""
    cluster = real_cluster
    dirs = [tmp_path / "a", tmp_path / "b"]
    first_served: list[
        tuple[int, bool]
    ] = []  # (serial, trusted by the API server's bundle when first served)

    def on_files(tls_dir: Path) -> Callable[[], None]:
        def check() -> None:
            leaf = served(tls_dir)
            # the bundles the API server holds at the moment the files change (a blocking read: the
            # Rotator calls this synchronously, and the server is another process)
            bundles = cluster.bundles_now()
            trusted = all(certs.trusted(leaf, bundle, cluster.clock.wall()) for bundle in bundles)
            first_served.append((leaf.serial_number, trusted))

        return check

    replicas = [cluster.rotator(d, on_files(d)) for d in dirs]
    cas_seen: set[int] = set()
    for _ in range(70):
        for replica in replicas:
            await replica.reconcile()
        now = cluster.clock.wall()
        for d in dirs:
            leaf = served(d)
            for bundle in await cluster.bundles():
                assert certs.trusted(leaf, bundle, now)
                assert len(bundle) <= 2
                cas_seen.update(ca.serial_number for ca in bundle)
            # renewed with a third of its life to spare, at most one round late
            assert leaf.not_valid_after_utc.timestamp() - now > POLICY.leaf_lifetime / 3 - DAY
        cluster.clock.tick(DAY)
    assert all(trusted for _, trusted in first_served)
    leaves = {serial for serial, _ in first_served}
    assert len(leaves) >= 70 / 5  # renewed on the first daily round with under 2 of its 6 days left
    assert len(cas_seen) >= 4  # a new CA every 20 days
    after = await cluster.stored_configuration()
    for stored in (after, cluster.configuration):
        stored["metadata"] = {k: stored["metadata"][k] for k in ("name", "labels")}
        for hook in stored["webhooks"]:
            hook["clientConfig"].pop("caBundle", None)
    assert after == cluster.configuration


async def test_a_lost_race_for_the_secret_is_retried_next_round(cluster: Cluster, tmp_path: Path) -> None:
    """When another replica wrote the Secret in between, the PUT gets 409; the next round adopts theirs."""
    a, b = cluster.rotator(tmp_path / "a"), cluster.rotator(tmp_path / "b")
    cluster.api.race = True
    assert await a.reconcile() is False
    assert not (tmp_path / "a" / certs.TLS_CERT).exists()
    assert await b.reconcile() is True
    assert await a.reconcile() is False  # nothing due: it adopts what b stored
    assert served(tmp_path / "a") == served(tmp_path / "b")


async def test_webhook_is_ready_only_once_its_certificate_is_published(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Readiness waits for a certificate the caBundle vouches for; an API outage keeps the one served
    and is counted in tokenrelay_webhook_certificate_errors_total."""
    config = webhook.WebhookSettings(
        injector=INJECTOR, tls_dir=tmp_path, namespace=NAMESPACE, cert_secret=SECRET
    )
    registry = CollectorRegistry()
    hook = webhook.Webhook(config, webhook.WebhookMetrics(registry), wall=cluster.clock.wall)
    hook.rotator = cluster.rotator(tmp_path, on_files=hook.reload)
    assert hook.ready() == f"no serving certificate loaded from {tmp_path}"
    cluster.api.fail = 1
    await webhook.upkeep_once(hook)
    assert hook.ready() == f"no serving certificate loaded from {tmp_path}"
    assert registry.get_sample_value("tokenrelay_webhook_certificate_errors_total") == 1
    await webhook.upkeep_once(hook)
    assert hook.ready() is None
    expiry = registry.get_sample_value("tokenrelay_webhook_certificate_expiry_timestamp_seconds")
    assert expiry == served(tmp_path).not_valid_after_utc.timestamp()
    cluster.api.fail = 10
    cluster.clock.tick(POLICY.leaf_lifetime)  # past the served leaf's end, the API server still away
    await webhook.upkeep_once(hook)
    assert hook.ready() is not None
    assert "not valid now" in str(hook.ready())
    cluster.api.fail = 0
    await webhook.upkeep_once(hook)
    assert hook.ready() is None
    other, _ = certs.make_ca(cluster.clock.wall(), DAY)
    hook.rotator.trusted = [other]
    assert (
        hook.ready()
        == "the serving certificate is not signed by a CA of the webhook configuration's caBundle"
    )


async def test_cluster_version_is_read_from_the_api_server(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhook learns the cluster's version from GET /version, through the kubeconfig it is given."""
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(kubeconfig(cluster.server)))  # JSON is YAML
    monkeypatch.setenv("KUBECONFIG", str(path))
    cluster.api.version = "v1.28.15-eks-7f9249a"
    assert await webhook.cluster_version() == (1, 28)
