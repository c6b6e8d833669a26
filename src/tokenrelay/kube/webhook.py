"""``tokenrelay webhook``: the mutating admission webhook, over HTTPS, sharing ``mutation`` with ``inject``.

Routes on the TLS listener (``--listen``): ``POST /mutate`` (AdmissionReview v1), ``/healthz``, and
``/readyz``, which the readiness probe reaches over the same TLS listener and which answers 200 only
when this replica can really serve: a certificate is loaded and valid, the CA that the API server
trusts for us (the caBundle we keep, or the mounted ``ca.crt``) signed it, and a canned pod goes
through the mutation. ``--metrics-listen`` serves /metrics in plain HTTP.

The serving certificate comes from files in ``--tls-dir`` (cert-manager's Secret mounted there,
reloaded when it changes), or, with ``--cert-secret``, from ``rotation.Rotator``, which issues,
rotates and publishes it through the Kubernetes API.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..errors import ConfigError
from ..lite.netloc import parse_hostport
from ..options import LOGGING, Option, add_options, logging_option, read_options
from ..serving import probes
from ..serving.listening import bind_error
from . import admission, certs, mutation, settings

if TYPE_CHECKING:
    from .rotation import Rotator

log = logging.getLogger("tokenrelay.webhook")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
CANARY: dict[str, Any] = {
    "metadata": {"name": "readiness-check", "annotations": {"tokenrelay.dev/identity": "readiness-check"}},
    "spec": {"containers": [{"name": "app", "image": "app"}]},
}


# The defaults, named once: the flags' rows (OPTIONS) and WebhookSettings both read them.
DEFAULT_LISTEN = "0.0.0.0:8443"
DEFAULT_METRICS_LISTEN = "0.0.0.0:9090"
DEFAULT_TLS_DIR = "/var/run/tokenrelay-webhook/tls"
DEFAULT_NAME = "tokenrelay-injector"  # of the Service and of the MutatingWebhookConfiguration
DEFAULT_CHECK_INTERVAL = 60.0
DEFAULT_SHUTDOWN_DELAY = 5.0


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    injector: mutation.Injector
    listen: tuple[str, int] = parse_hostport(DEFAULT_LISTEN)
    metrics_listen: tuple[str, int] | None = parse_hostport(DEFAULT_METRICS_LISTEN)
    tls_dir: Path = Path(DEFAULT_TLS_DIR)
    namespace: str = "tokenrelay-system"
    excluded: frozenset[str] = frozenset({"kube-system"})
    cert_secret: str | None = None  # None: the files come from elsewhere (cert-manager)
    webhook_configuration: str = DEFAULT_NAME
    service: str = DEFAULT_NAME
    check_interval: float = DEFAULT_CHECK_INTERVAL
    shutdown_delay: float = DEFAULT_SHUTDOWN_DELAY
    policy: certs.Policy = field(default_factory=certs.Policy)

    @property
    def dns_names(self) -> list[str]:
        # The API server calls <service>.<namespace>.svc; the others serve port-forwards and humans.
        return [f"{self.service}.{self.namespace}.svc", f"{self.service}.{self.namespace}.svc.cluster.local"]


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.admissions = Counter(
            "tokenrelay_webhook_admissions",
            "AdmissionReviews answered, by result (injected, already_injected, opted_out, "
            "excluded_namespace, ignored, refused, invalid).",
            ["result"],
            registry=registry,
        )
        for result in admission.RESULTS:
            self.admissions.labels(result=result)
        self.duration = Histogram(
            "tokenrelay_webhook_admission_duration_seconds",
            "Time to answer one AdmissionReview.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=registry,
        )
        self.certificate_expiry = Gauge(
            "tokenrelay_webhook_certificate_expiry_timestamp_seconds",
            "Unix time at which the served certificate expires.",
            registry=registry,
        )
        self.rotation_errors = Counter(
            "tokenrelay_webhook_certificate_errors",
            "Rounds of certificate upkeep (Secret, caBundle, files) that failed.",
            registry=registry,
        )


class Webhook:
    """The TLS listener's state: the loaded certificate, the trusted CAs, readiness, the handler."""

    def __init__(
        self,
        config: WebhookSettings,
        metrics: WebhookMetrics,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self._wall = wall
        self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._loaded: tuple[bytes, bytes] | None = None
        self.certificate: x509.Certificate | None = None
        self.rotator: Rotator | None = None
        self.stopping = False

    def reload(self) -> None:
        """Load ``--tls-dir``'s files into the TLS context when they changed (for new handshakes)."""
        cert_path, key_path = self.config.tls_dir / certs.TLS_CERT, self.config.tls_dir / certs.TLS_KEY
        try:
            files = (cert_path.read_bytes(), key_path.read_bytes())
        except OSError as exc:
            log.warning("no serving certificate to load", extra={"path": str(cert_path), "error": str(exc)})
            return
        if files == self._loaded:
            return
        try:
            self.ssl.load_cert_chain(cert_path, key_path)
            certificate = x509.load_pem_x509_certificate(files[0])
        except (ssl.SSLError, ValueError) as exc:
            log.error("serving certificate not loaded", extra={"path": str(cert_path), "error": str(exc)})
            return
        self._loaded, self.certificate = files, certificate
        self.metrics.certificate_expiry.set(certificate.not_valid_after_utc.timestamp())
        log.info(
            "serving certificate loaded",
            extra={
                "notAfter": certificate.not_valid_after_utc.isoformat(),
                "serial": hex(certificate.serial_number),
            },
        )

    def trusted_cas(self) -> list[x509.Certificate] | None:
        """The CAs the API server uses to check us, when we know them."""
        if self.rotator is not None:
            return self.rotator.trusted
        try:
            return x509.load_pem_x509_certificates((self.config.tls_dir / certs.CA_CERT).read_bytes())
        except (OSError, ValueError):
            return None  # an issuer that does not put ca.crt in the Secret: nothing to check against

    def ready(self) -> str | None:
        """None when this replica can serve admissions, else why not."""
        if self.stopping:
            return "shutting down"
        cert = self.certificate
        now = self._wall()
        if cert is None:
            return f"no serving certificate loaded from {self.config.tls_dir}"
        if not cert.not_valid_before_utc.timestamp() <= now < cert.not_valid_after_utc.timestamp():
            return (
                f"the serving certificate is not valid now (notAfter {cert.not_valid_after_utc.isoformat()})"
            )
        cas = self.trusted_cas()
        if cas is not None and not certs.trusted(cert, cas, now):
            where = (
                "the webhook configuration's caBundle" if self.rotator else f"{self.config.tls_dir}/ca.crt"
            )
            return f"the serving certificate is not signed by a CA of {where}"
        # On a cluster too old for native sidecars the replica stays ready: it must answer every
        # opted-in pod with the refusal that says why, not leave the API server without an answer.
        injector = dataclasses.replace(self.config.injector, kube_version=None)
        try:
            if not mutation.mutate(CANARY, injector).ops:
                return "the mutation of a test pod produced no patch"
        except Exception as exc:  # a broken injector must show as not ready, whatever broke
            return f"the mutation of a test pod failed: {exc}"
        return None

    async def mutate(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        try:
            review = json.loads(await request.read())
            body, result = admission.answer(review, self.config.injector, self.config.excluded)
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep to decode
            self.metrics.admissions.labels(result="invalid").inc()
            return web.json_response({"error": f"not an AdmissionReview v1: {exc}"}, status=400)
        self.metrics.admissions.labels(result=result).inc()
        self.metrics.duration.observe(time.perf_counter() - started)
        request_ = review["request"]
        log.info(
            "admission",
            extra={
                "result": result,
                "namespace": request_.get("namespace"),
                "pod": admission.pod_name(review),
                "uid": request_.get("uid"),
                **({"reason": body["response"]["status"]["message"]} if result == admission.REFUSED else {}),
            },
        )
        return web.json_response(body)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024 * 1024)  # the API server sends at most 3 MiB
        app.router.add_post("/mutate", self.mutate)
        probes.health_routes(app, self.ready)
        return app


async def upkeep(webhook: Webhook, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Forever, after the first round that ``serve`` ran: a round every --check-interval, or every
    5 seconds while no certificate is loaded (the API server was away at start)."""
    while True:
        interval = webhook.config.check_interval
        await sleep(interval if webhook.certificate is not None else min(interval, 5.0))
        await upkeep_once(webhook)


async def upkeep_once(webhook: Webhook) -> None:
    if webhook.rotator is not None:
        try:
            await webhook.rotator.reconcile()
        except Exception as exc:  # the API server may be briefly away: keep serving, try next round
            webhook.metrics.rotation_errors.inc()
            log.error("certificate upkeep failed", extra={"error": f"{type(exc).__name__}: {exc}"})
    webhook.reload()


async def cluster_version() -> tuple[int, int] | None:
    """The API server's version (GET /version), through lightkube's configured HTTP client."""
    from lightkube.config.client_adapter import AsyncClient, ConnectionParams
    from lightkube.config.kubeconfig import KubeConfig

    config = KubeConfig.from_env().get()
    if config is None:
        return None
    async with AsyncClient(config, ConnectionParams()) as http:
        response = await http.get("/version")
        response.raise_for_status()
        return settings.parse_version(str(response.json().get("gitVersion", "")))


async def serve(config: WebhookSettings, stop: asyncio.Event | None = None) -> int:
    """Run the webhook until ``stop`` is set (or SIGTERM/SIGINT)."""
    from ..serving import probes

    registry = CollectorRegistry()
    webhook = Webhook(config, WebhookMetrics(registry))
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    client = None
    if config.cert_secret is not None:
        from lightkube import AsyncClient

        from .rotation import Rotator

        try:
            client = AsyncClient()
        except Exception as exc:  # lightkube's ConfigError and whatever a broken kubeconfig raises
            raise ConfigError(
                f"--cert-secret needs the Kubernetes API (in-cluster service account or $KUBECONFIG): {exc}"
            ) from None
        webhook.rotator = Rotator(
            client,
            namespace=config.namespace,
            secret=config.cert_secret,
            webhook_configuration=config.webhook_configuration,
            dns_names=config.dns_names,
            tls_dir=config.tls_dir,
            policy=config.policy,
            on_files=webhook.reload,
        )
    if config.injector.kube_version is None and (
        client is not None or os.environ.get("KUBERNETES_SERVICE_HOST")
    ):
        try:
            version = await cluster_version()
        except Exception as exc:
            log.warning("Kubernetes version not known; assuming 1.29 or later", extra={"error": str(exc)})
        else:
            if version is not None:
                config = _with_version(config, version)
                webhook.config = config
                log.info("cluster version", extra={"version": ".".join(map(str, version))})
    await upkeep_once(webhook)
    runner = web.AppRunner(webhook.app(), access_log=None, handle_signals=False, shutdown_timeout=10)
    await runner.setup()
    site = web.TCPSite(runner, config.listen[0], config.listen[1], ssl_context=webhook.ssl)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise bind_error(exc, "--listen", *config.listen) from None
    port = runner.addresses[0][1]
    log.info("webhook serving", extra={"listen": f"https://{config.listen[0]}:{port}/mutate"})
    metrics_server = None
    if config.metrics_listen is not None:
        metrics_server = probes.MetricsServer(config.metrics_listen, registry, webhook.ready)
        await metrics_server.start()
    task = asyncio.create_task(upkeep(webhook))
    try:
        await stop.wait()
        # Not ready at once, then a pause for the endpoints to drop this replica before it closes.
        webhook.stopping = True
        await asyncio.sleep(config.shutdown_delay)
    finally:
        task.cancel()
        await runner.cleanup()
        if metrics_server is not None:
            await metrics_server.stop()
        if client is not None:
            await client.close()
    return 0


def _with_version(config: WebhookSettings, version: tuple[int, int]) -> WebhookSettings:
    return dataclasses.replace(config, injector=dataclasses.replace(config.injector, kube_version=version))


OPTIONS: tuple[Option, ...] = (
    Option(
        "listen",
        "The HTTPS listener: POST /mutate, /healthz, /readyz.",
        kind="hostport",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        variable=None,
    ),
    Option(
        "metrics_listen",
        "/metrics (and /healthz, /readyz) in plain HTTP.",
        kind="hostport",
        default=DEFAULT_METRICS_LISTEN,
        metavar="HOST:PORT",
        variable=None,
    ),
    Option(
        "tls_dir",
        "Directory of tls.crt, tls.key and ca.crt: cert-manager's Secret mounted there, or where "
        "--cert-secret writes.",
        kind="path",
        default=DEFAULT_TLS_DIR,
        metavar="DIR",
        variable=None,
    ),
    Option(
        "cert_secret",
        "Issue and rotate the serving certificate in this Secret and keep the caBundle current "
        "(without it, --tls-dir is only read).",
        metavar="NAME",
        variable=None,
    ),
    Option(
        "webhook_configuration",
        "The MutatingWebhookConfiguration whose caBundle --cert-secret keeps.",
        default=DEFAULT_NAME,
        metavar="NAME",
        variable=None,
    ),
    Option(
        "service",
        "The webhook's Service: the certificate is for NAME.NAMESPACE.svc.",
        default=DEFAULT_NAME,
        metavar="NAME",
        variable=None,
    ),
    Option(
        "namespace",
        "The webhook's namespace, never mutated; in a pod, the service account's namespace when unset.",
        metavar="NS",
        variable="POD_NAMESPACE",  # the name the downward API is usually given
    ),
    Option(
        "exclude_namespace",
        "Another namespace never to mutate (repeatable); kube-system and the webhook's own always are.",
        kind="list",
        repeatable=True,
        default=(),
        metavar="NS",
        variable=None,
    ),
    Option(
        "check_interval",
        "How often the certificate is checked, rotated and reloaded, in seconds.",
        kind="delay",
        default=DEFAULT_CHECK_INTERVAL,
        metavar="SECONDS",
        variable=None,
    ),
    Option(
        "shutdown_delay",
        "On SIGTERM, how long to keep serving while not ready, so the Service drops this replica "
        "first, in seconds.",
        kind="delay",
        default=DEFAULT_SHUTDOWN_DELAY,
        metavar="SECONDS",
        variable=None,
    ),
    *(logging_option(name) for name in LOGGING),
)
BY_NAME = {option.name: option for option in OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)
    settings.add_arguments(parser)


def webhook_settings(args: argparse.Namespace, environ: dict[str, str] | None = None) -> WebhookSettings:
    env = dict(os.environ) if environ is None else environ
    injector = settings.injector(args, env)
    # --metrics-listen "" turns the metrics listener off
    metrics_off = getattr(args, "metrics_listen", None) == ""
    if metrics_off:
        args = argparse.Namespace(**{**vars(args), "metrics_listen": None})
    given = read_options(OPTIONS, args, env)
    namespace = given["namespace"]
    if not namespace:
        try:
            namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        except OSError:
            raise ConfigError(f"{BY_NAME['namespace'].where()} is required outside a pod") from None
    return WebhookSettings(
        injector=injector,
        listen=given["listen"],
        metrics_listen=None if metrics_off else given["metrics_listen"],
        tls_dir=Path(given["tls_dir"]),
        namespace=namespace,
        excluded=frozenset({"kube-system", namespace, *given["exclude_namespace"]}),
        cert_secret=given["cert_secret"],
        webhook_configuration=given["webhook_configuration"],
        service=given["service"],
        check_interval=given["check_interval"],
        shutdown_delay=given["shutdown_delay"],
    )


def run(args: argparse.Namespace) -> int:
    from ..serving import logs

    try:
        config = webhook_settings(args)
    except ConfigError as exc:
        print(f"tokenrelay webhook: {exc}", file=sys.stderr)
        return 2
    logs.setup(args.log_level, args.log_format)
    try:
        return asyncio.run(serve(config))
    except ConfigError as exc:
        print(f"tokenrelay webhook: {exc}", file=sys.stderr)
        return 2
