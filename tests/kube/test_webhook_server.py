"""`tokenrelay webhook` as a user runs it: real TLS, real AdmissionReview POSTs, probes and metrics."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tokenrelay.kube import admission, certs, webhook

from ..support.kube import FIXTURES, INJECTOR, cli, ops_of, review

HOST = "tokenrelay-injector.tokenrelay-system.svc"


def write_pki(directory: Path, now: float, ca: Any = None) -> tuple[x509.Certificate, x509.Certificate]:
    """A CA and a serving leaf for HOST in ``directory``, laid out as cert-manager's Secret is mounted."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = ca or certs.make_ca(now - 60, 86400 * 30)
    leaf, key = certs.make_leaf(ca_cert, ca_key, [HOST], now - 60, 86400 * 7)
    (directory / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.crt").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca_cert, leaf


@dataclass
class Running:
    process: subprocess.Popen[str]
    url: str
    metrics: str
    tls: ssl.SSLContext


def _listen(stream: IO[str], messages: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in stream:
        record = json.loads(line)
        if record["msg"] in messages:
            found[record["msg"]] = record["listen"]
        if found.keys() == messages:
            return found
    pytest.fail("tokenrelay webhook exited before serving")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    import time

    tls_dir = tmp_path_factory.mktemp("tls")
    ca, _ = write_pki(tls_dir, time.time())
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    args = [
        cli(),
        "webhook",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--tls-dir",
        str(tls_dir),
    ]
    args += ["--namespace", "tokenrelay-system", "--shutdown-delay", "0", "--auth-url", INJECTOR.auth_url]
    args += ["--api-url", INJECTOR.api_url, "--image", INJECTOR.image]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    found = _listen(process.stderr, {"webhook serving", "metrics serving"})
    tls = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    url = found["webhook serving"].removesuffix("/mutate")
    try:
        yield Running(process, url, "http://" + found["metrics serving"], tls)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stderr.close()


async def post(server: Running, body: Any, tls: ssl.SSLContext | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with session.post(
            server.url + "/mutate",
            data=data,
            headers={"Content-Type": "application/json"},
            ssl=tls or server.tls,
            server_hostname=HOST,  # verified as the API server verifies it: the Service's DNS name
        ) as response:
            return response.status, await response.json()


async def test_admission_reviews_over_tls_get_the_same_answers(server: Running) -> None:
    """POSTed over TLS (certificate verified for the Service name), each pod gets the answer the mutation
    gives in-process: a patch, no patch, or a refusal."""
    for name in ("03-istio-native", "08-job-pod", "14-already-injected"):
        fixture = FIXTURES[name]
        body = review(copy.deepcopy(fixture["pod"]), fixture["namespace"], uid=f"uid-{name}")
        status, answer = await post(server, body)
        assert status == 200
        expected, _ = admission.answer(body, INJECTOR, {"kube-system", "tokenrelay-system"})
        assert answer == expected
        assert answer["response"]["uid"] == f"uid-{name}"
    pod = copy.deepcopy(FIXTURES["12-bare"]["pod"])
    del pod["metadata"]["annotations"]
    status, answer = await post(server, review(pod, "sandbox"))
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert (
        "no identity: add the annotation tokenrelay.dev/identity" in answer["response"]["status"]["message"]
    )
    status, answer = await post(server, review(FIXTURES["12-bare"]["pod"], "tokenrelay-system"))
    assert status == 200
    assert ops_of(answer) == []  # never its own namespace


async def test_a_client_that_does_not_trust_the_ca_cannot_connect(server: Running, tmp_path: Path) -> None:
    """The listener really is TLS with the given certificate: another CA's trust store fails the handshake."""
    import time

    other, _ = write_pki(tmp_path, time.time())
    tls = ssl.create_default_context(cadata=other.public_bytes(serialization.Encoding.PEM).decode())
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await post(server, review(FIXTURES["12-bare"]["pod"], "sandbox"), tls)


async def test_garbage_is_a_400_and_probes_and_metrics_tell_the_truth(server: Running) -> None:
    """A body that is not an AdmissionReview gets 400; /readyz answers 200 over TLS; /metrics counts
    admissions by result."""
    status, answer = await post(server, b"{not json")
    assert status == 400
    assert answer["error"].startswith("not an AdmissionReview v1")
    async with aiohttp.ClientSession() as session:
        async with session.get(server.url + "/readyz", ssl=server.tls, server_hostname=HOST) as response:
            assert response.status == 200
            assert await response.json() == {"status": "ready"}
        async with session.get(server.metrics + "/metrics") as response:
            text = await response.text()
    samples = {
        s.labels["result"]: s.value
        for family in text_string_to_metric_families(text)
        if family.name == "tokenrelay_webhook_admissions"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert set(samples) == set(admission.RESULTS)
    assert samples["invalid"] >= 1


def malformed_reviews() -> dict[str, bytes]:
    """Bodies the API server never sends but a client of the Service can: each must be a 400."""

    def changed(change: Any) -> bytes:
        body = review(copy.deepcopy(FIXTURES["12-bare"]["pod"]), "sandbox")
        change(body["request"])
        return json.dumps(body).encode()

    def metadata_list(request: dict[str, Any]) -> None:
        request["object"]["metadata"] = ["debug"]
        del request["namespace"], request["name"]

    return {
        "deeply nested": b"[" * 100_000 + b"]" * 100_000,
        "kind a string": changed(lambda request: request.update(kind="Pod")),
        "metadata a list": changed(metadata_list),
        "namespace a list": changed(lambda request: request.update(namespace=["sandbox"])),
        "object a list": changed(lambda request: request.update(object=["pod"])),
    }


async def test_malformed_reviews_are_a_400_not_a_500(server: Running) -> None:
    """Deep nesting, `kind` given as a string, `metadata` as a list (and other fields of the wrong type)
    get 400 with the reason, and the webhook keeps serving."""
    for name, body in malformed_reviews().items():
        status, answer = await post(server, body)
        assert (name, status) == (name, 400)
        assert answer["error"].startswith("not an AdmissionReview v1: "), (name, answer)
    status, answer = await post(server, review(FIXTURES["12-bare"]["pod"], "sandbox"))
    assert status == 200
    assert answer["response"]["patch"]


def test_sigterm_stops_it_cleanly(server: Running) -> None:
    """SIGTERM ends the webhook with status 0 (after --shutdown-delay, here 0)."""
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=20) == 0


async def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    """When cert-manager rewrites the mounted files, the next upkeep round loads them: new handshakes
    get the new certificate, and readiness checks it against the mounted ca.crt."""
    import time

    ca_pair = certs.make_ca(time.time() - 60, 86400 * 30)
    _, first = write_pki(tmp_path, time.time(), ca_pair)
    config = webhook.WebhookSettings(injector=INJECTOR, tls_dir=tmp_path, namespace="tokenrelay-system")
    hook = webhook.Webhook(config, webhook.WebhookMetrics(CollectorRegistry()))
    await webhook.upkeep_once(hook)
    runner = web.AppRunner(hook.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=hook.ssl)
    await site.start()
    port = runner.addresses[0][1]

    async def served_serial() -> int:
        tls = ssl.create_default_context(cadata=ca_pair[0].public_bytes(serialization.Encoding.PEM).decode())
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls, server_hostname=HOST)
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        await writer.wait_closed()
        return x509.load_der_x509_certificate(der).serial_number

    try:
        assert await served_serial() == first.serial_number
        assert hook.ready() is None
        _, second = write_pki(tmp_path, time.time(), ca_pair)
        await webhook.upkeep_once(hook)
        assert await served_serial() == second.serial_number
        write_pki(tmp_path, time.time())  # a leaf of another CA, with that CA as ca.crt: still consistent
        (tmp_path / "ca.crt").write_bytes(ca_pair[0].public_bytes(serialization.Encoding.PEM))
        await webhook.upkeep_once(hook)
        assert hook.ready() == f"the serving certificate is not signed by a CA of {tmp_path}/ca.crt"
    finally:
        await runner.cleanup()


def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path) -> None:
    """Without --auth-url, with a malformed --listen, or --cert-secret without any way to reach the
    Kubernetes API, the webhook exits 2 with a one-line reason."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    done = subprocess.run(
        [cli(), "webhook", "--namespace", "x", "--api-url", "https://api.example.com"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "tokenrelay webhook: --auth-url (env TOKENRELAY_AUTH_URL) is required: Token service base URL "
        "the sidecars use (their --auth-url; also the default audience of the projected token).\n"
    )
    done = subprocess.run(
        [cli(), "webhook", "--namespace", "x", "--listen", "8443", "--auth-url", "https://a.example",
         "--api-url", "https://b.example"],
        capture_output=True,
        text=True,
        env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == "tokenrelay webhook: --listen: '8443' is not HOST:PORT, e.g. 0.0.0.0:8443\n"
    env = {k: v for k, v in env.items() if not k.startswith(("KUBE", "HOME"))}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config either
    done = subprocess.run(
        [cli(), "webhook", "--namespace", "x", "--cert-secret", "tls", "--auth-url", "https://a.example",
         "--api-url", "https://b.example", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith(
        "tokenrelay webhook: --cert-secret needs the Kubernetes API (in-cluster service account or "
        "$KUBECONFIG): "
    )
    assert done.stderr.count("\n") == 1
