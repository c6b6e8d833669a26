"""The self-issued certificate against a fake API server, on a fake clock: issued, rotated, published."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from cryptography import x509
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from prometheus_client import CollectorRegistry

from tokenrelay.kube import certs, webhook
from tokenrelay.kube.rotation import Rotator
from tokenrelay.testing import FakeClock

from ..support.kube import INJECTOR
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


async def test_two_replicas_keep_a_trusted_certificate_through_years_of_rotation(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Over 70 daily rounds by two replicas (CA life 30 days, leaf 6), every certificate is in the
    caBundle before it is served, no served certificate is ever untrusted or near expiry, CAs and
    leaves rotate, and expired CAs leave the bundle."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    first_served: list[
        tuple[int, bool]
    ] = []  # (serial, trusted by the API server's bundle when first served)

    def on_files(tls_dir: Path) -> Callable[[], None]:
        def check() -> None:
            leaf = served(tls_dir)
            trusted = all(certs.trusted(leaf, bundle, cluster.clock.wall()) for bundle in cluster.bundles())
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
            for bundle in cluster.bundles():
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
    assert cluster.api.configurations[CONFIGURATION]["webhooks"][0]["futureField"] == {"keep": True}


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
