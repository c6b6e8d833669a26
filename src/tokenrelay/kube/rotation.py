"""The webhook's self-issued certificate in the cluster: one Secret, the caBundle, the files it serves.

Every replica runs ``Rotator.reconcile`` on a timer: read the Secret, let ``certs.reconcile`` decide
whether anything is due, store the result with the Secret's ``resourceVersion`` (so of two replicas
racing, one wins and the other re-reads next round), make every webhook of the
MutatingWebhookConfiguration carry the Secret's CA bundle, then write the serving files the TLS
listener reloads. The bundle is written before the files are, so the API server already trusts a
certificate when it is first served.

The Kubernetes client is lightkube: typed (it ships ``py.typed``, so mypy strict checks our calls),
asyncio-native, small in API and import (models load per API group), and it reads in-cluster and
kubeconfig credentials itself. kubernetes_asyncio, the other asyncio client, is generated code of
several megabytes with no type hints, and decodes whole objects into generated classes. We touch
only a Secret and one MutatingWebhookConfiguration, by JSON patch for the latter, so no field of
the configuration that we do not know is ever rewritten. Imported only by ``tokenrelay webhook``.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509

from ..serving.sinks import write_private_file
from . import certs

if TYPE_CHECKING:
    from lightkube import AsyncClient

log = logging.getLogger("tokenrelay.webhook")


class Rotator:
    """Keeps the Secret, the caBundle and the serving files of one webhook replica current."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        secret: str,
        webhook_configuration: str,
        dns_names: list[str],
        tls_dir: Path,
        policy: certs.Policy | None = None,
        wall: Callable[[], float] = time.time,
        on_files: Callable[[], None] = lambda: None,
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._secret = secret
        self._configuration = webhook_configuration
        self._dns_names = dns_names
        self._tls_dir = tls_dir
        self._policy = policy or certs.Policy()
        self._wall = wall
        self._on_files = on_files
        self._written: dict[str, bytes] = {}
        # The CA certificates the configuration's caBundle held after the last round: readiness
        # checks the served certificate against them.
        self.trusted: list[x509.Certificate] = []

    async def reconcile(self) -> bool:
        """One round; returns whether this replica changed the Secret. Raises lightkube's errors."""
        from lightkube import ApiError
        from lightkube.resources.core_v1 import Secret

        secret = await self._client.get(Secret, self._secret, namespace=self._namespace)
        data = {key: base64.b64decode(value) for key, value in (secret.data or {}).items()}
        new = certs.reconcile(data, self._wall(), self._dns_names, self._policy)
        if new is not None:
            secret.data = {key: base64.b64encode(value).decode() for key, value in new.items()}
            try:
                await self._client.replace(secret)  # carries metadata.resourceVersion
            except ApiError as exc:
                if exc.status.code != 409:
                    raise
                log.info("certificate secret changed by another replica; re-reading next round")
                return False
            log.info(
                "webhook certificate stored",
                extra={"secret": f"{self._namespace}/{self._secret}", "dnsNames": self._dns_names},
            )
            data = new
        await self._sync_bundle(data[certs.CA_CERT])
        self._write_files(data)
        return new is not None

    async def _sync_bundle(self, bundle: bytes) -> None:
        from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
        from lightkube.types import PatchType

        want = base64.b64encode(bundle).decode()
        configuration = await self._client.get(MutatingWebhookConfiguration, self._configuration)
        ops: list[dict[str, Any]] = []
        for i, webhook in enumerate(configuration.webhooks or []):
            if webhook.clientConfig.caBundle != want:
                # "test" first: if the list was reordered since we read it, the patch fails whole.
                ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": webhook.name})
                ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want})
        if ops:
            await self._client.patch(
                MutatingWebhookConfiguration, self._configuration, ops, patch_type=PatchType.JSON
            )
            log.info(
                "caBundle updated", extra={"configuration": self._configuration, "webhooks": len(ops) // 2}
            )
        self.trusted = x509.load_pem_x509_certificates(bundle)

    def _write_files(self, data: dict[str, bytes]) -> None:
        files = {name: data[name] for name in (certs.CA_CERT, certs.TLS_CERT, certs.TLS_KEY)}
        if files == self._written:
            return
        # The key before the certificate: a reload between the two must not pair a new cert with an old key
        # for long; the listener reloads only once both are written (on_files).
        for name in (certs.TLS_KEY, certs.TLS_CERT, certs.CA_CERT):
            write_private_file(self._tls_dir / name, files[name], 0o600)
        self._written = files
        self._on_files()
