"""`tokenrelay webhook --cert-secret` as a user runs it, against a fake API server on loopback."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import signal
import ssl
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer

from tokenrelay.kube import admission

from ..support.kube import FIXTURES, INJECTOR, cli, review
from ..support.kubeapi import CONFIGURATION, NAMESPACE, SECRET, FakeApi, configuration, kubeconfig

HOST = f"tokenrelay-injector.{NAMESPACE}.svc"


async def test_self_signed_webhook_publishes_its_ca_serves_and_learns_the_cluster_version(
    tmp_path: Path,
) -> None:
    """Started with --cert-secret, the webhook fills the Secret, puts its CA in both webhooks' caBundle,
    and serves TLS that this caBundle verifies, as the API server would; it read GET /version and so
    refuses pods on a 1.28 cluster, saying why."""
    api = FakeApi(NAMESPACE, SECRET, configuration(), version="v1.28.15-gke.1020000")
    server = TestServer(api.app(), host="127.0.0.1")
    await server.start_server()
    (tmp_path / "kubeconfig").write_text(json.dumps(kubeconfig(str(server.make_url("")).rstrip("/"))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "TOKENRELAY_"))}
    env["KUBECONFIG"] = str(tmp_path / "kubeconfig")
    tls_dir = tmp_path / "tls"
    process = await asyncio.create_subprocess_exec(
        cli(), "webhook", "--cert-secret", SECRET, "--namespace", NAMESPACE, "--listen", "127.0.0.1:0",
        "--metrics-listen", "127.0.0.1:0", "--tls-dir", str(tls_dir), "--shutdown-delay", "0",
        "--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url,
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        url = ""
        while not url:
            line = await asyncio.wait_for(process.stderr.readline(), 30)
            assert line, "tokenrelay webhook exited before serving"
            record = json.loads(line)
            if record["msg"] == "webhook serving":
                url = record["listen"]
        bundles = {h["clientConfig"]["caBundle"] for h in api.configurations[CONFIGURATION]["webhooks"]}
        assert len(bundles) == 1
        tls = ssl.create_default_context(cadata=base64.b64decode(bundles.pop()).decode())
        assert set(api.secrets[SECRET]["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
        assert (tls_dir / "tls.key").stat().st_mode & 0o777 == 0o600
        assert "GET /version" in api.calls
        body = review(FIXTURES["12-bare"]["pod"], "sandbox")
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json=body, ssl=tls, server_hostname=HOST) as response:
                answer = await response.json()
            async with session.get(
                url.replace("/mutate", "/readyz"), ssl=tls, server_hostname=HOST
            ) as response:
                assert response.status == 200, await response.text()
        assert answer["response"]["allowed"] is False
        assert answer["response"]["status"]["message"].endswith(
            "needs Kubernetes 1.29 or later; this cluster is 1.28"
        )
        expected, _ = admission.answer(body, dataclasses.replace(INJECTOR, kube_version=(1, 28)))
        assert answer == expected
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
        await server.close()
