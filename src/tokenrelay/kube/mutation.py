"""The pod mutation shared by ``tokenrelay inject`` and ``tokenrelay webhook``: JSON-patch ``add``s only.

It reads the pod as a plain dict and never rebuilds it: every operation is an RFC 6902 ``add`` of
something new (a container, a volume, an env entry, a mount, an annotation), so a field this code
has never heard of, in the pod or in the containers it touches, reaches the API server unchanged.
Injectors that decode the pod into typed structs and re-encode it drop such fields: that is how
``restartPolicy: Always`` vanished from native sidecars under older webhooks.

What is added (docs/kubernetes.md explains each choice):

* a native sidecar: an init container ``tokenrelay`` with ``restartPolicy: Always`` running
  ``tokenrelay run``, started-up on ``/readyz`` so the containers after it start once a token is held;
* a projected service-account token volume for the sidecar alone;
* an in-memory ``emptyDir`` for the socket, mounted read-only in the app containers, with
  ``TOKENRELAY_SOCKET`` (and ``TOKENRELAY_PROXY_URL`` when the proxy is on) in their environment;
* the annotation ``tokenrelay.dev/status: injected``, which makes the mutation idempotent.

A pod that cannot be injected as it stands raises ``InjectionRefused`` listing every reason at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InjectionRefused
from ..lite.names import DEFAULT_SOCKET, PROXY_URL_ENV
from ..lite.names import SOCKET_ENV as SOCKET_ENV  # re-exported: what the app containers get
from . import options
from .options import PodOptions

MIN_KUBE_VERSION = (1, 29)  # native sidecars (SidecarContainers) are on by default from 1.29
CONTAINER = "tokenrelay"
SOCKET_VOLUME = "tokenrelay-socket"
TOKEN_VOLUME = "tokenrelay-oidc-token"
SOCKET_DIR = DEFAULT_SOCKET.rpartition("/")[0]
TOKEN_DIR = "/var/run/secrets/tokenrelay"
TOKEN_FILE = "oidc-token"
PROXY_ENV = PROXY_URL_ENV
DEFAULT_UID = 65532  # the image's numeric user
METRICS_PORT_NAME = "tr-metrics"  # a port name has at most 15 characters

Op = dict[str, Any]
Pod = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Injector:
    """The cluster-wide settings of an injector: where tokens come from, and the sidecar's image."""

    auth_url: str
    api_url: str
    image: str
    oidc_audience: str | None = None  # the projected token's audience; default the auth URL
    kube_version: tuple[int, int] | None = None  # None: not known, assumed recent enough


@dataclass(frozen=True, slots=True)
class Mutation:
    """The patch for one pod, and why it is what it is (``injected``, ``already injected``, ``opted out``)."""

    ops: list[Op]
    result: str


def pointer(*parts: str | int) -> str:
    """An RFC 6901 JSON pointer from its reference tokens."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def mutate(pod: Pod, injector: Injector, *, base: str = "", identity: str | None = None) -> Mutation:
    """The ``add`` operations injecting tokenrelay into ``pod`` (a Pod or a pod template: metadata
    and spec), with paths under ``base``; ``identity`` stands in for a missing annotation."""
    metadata: Mapping[str, Any] = pod.get("metadata") or {}
    annotations: Mapping[str, Any] = metadata.get("annotations") or {}
    labels: Mapping[str, Any] = metadata.get("labels") or {}
    if annotations.get(options.STATUS) == "injected":
        return Mutation([], "already injected")
    if labels.get(options.INJECT_LABEL) == "disabled":
        return Mutation([], "opted out")
    if injector.kube_version is not None and injector.kube_version < MIN_KUBE_VERSION:
        have = ".".join(map(str, injector.kube_version))
        raise InjectionRefused(
            "tokenrelay injects a native sidecar (an init container with restartPolicy: Always), which "
            f"needs Kubernetes 1.29 or later; this cluster is {have}"
        )
    spec: Mapping[str, Any] = pod.get("spec") or {}
    problems = _clashes(spec)
    try:
        opts = options.parse(annotations, identity)
    except InjectionRefused as exc:
        problems.append(str(exc))
    else:
        problems += _conflicts(spec, opts)
    if problems:
        raise InjectionRefused("; ".join(dict.fromkeys(problems)))
    return Mutation(_ops(pod, opts, injector, base), "injected")


def _containers(spec: Mapping[str, Any], field: str) -> Sequence[Mapping[str, Any]]:
    value = spec.get(field)
    return value if isinstance(value, list) else []


def _clashes(spec: Mapping[str, Any]) -> list[str]:
    """What stands in the way whatever the annotations say."""
    problems: list[str] = []
    if (spec.get("os") or {}).get("name") == "windows":
        problems.append(
            "the pod runs on Windows (spec.os.name: windows); tokenrelay's sidecar is a Linux container"
        )
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in _containers(spec, field):
            if container.get("name") == CONTAINER:
                problems.append(
                    f"the pod already has a container named {CONTAINER} (in {field}); rename it, or remove "
                    f"a hand-written tokenrelay sidecar and let the injector add it"
                )
    for volume in spec.get("volumes") or []:
        if volume.get("name") in (SOCKET_VOLUME, TOKEN_VOLUME):
            problems.append(f"the pod already has a volume named {volume['name']}; rename it")
    return problems


def _conflicts(spec: Mapping[str, Any], opts: PodOptions) -> list[str]:
    """What the pod's annotations ask for that the pod cannot have."""
    problems: list[str] = []
    ports = {opts.metrics_port: options.METRICS_PORT}
    if opts.proxy:
        ports[opts.proxy_port] = options.PROXY_PORT
        if spec.get("hostNetwork"):
            problems.append(
                "the pod uses hostNetwork: the proxy would listen on the node's loopback, where every "
                f"process of the node could use the pod's token; remove {options.PROXY}: on "
                "(the socket works)"
            )
    for field in ("initContainers", "containers"):
        for container in _containers(spec, field):
            for port in container.get("ports") or []:
                taken = port.get("containerPort")
                if taken in ports:
                    problems.append(
                        f"container {container.get('name')} already uses port {taken}; set the annotation "
                        f"{ports[taken]} to a free port"
                    )
    for container in _app_containers(spec)[1]:
        name = container.get("name")
        for mount in container.get("volumeMounts") or []:
            if str(mount.get("mountPath", "")).rstrip("/") == SOCKET_DIR:
                problems.append(
                    f"container {name} already mounts {mount.get('name')} at {SOCKET_DIR}, where the "
                    "injector mounts the socket; move that mount"
                )
        wanted = _env(opts)
        for entry in container.get("env") or []:
            key = entry.get("name")
            if key in wanted and entry != {"name": key, "value": wanted[key]}:
                problems.append(
                    f"container {name} already sets {key} to something else; remove it (the injector "
                    f"sets {key}={wanted[key]})"
                )
    return problems


def _insertion_index(spec: Mapping[str, Any]) -> int:
    """Where the sidecar goes among the init containers: after the last native sidecar already
    there (a service mesh's proxy, which our exchanges may need), before every ordinary init
    container after it (which may need the token)."""
    index = 0
    for i, container in enumerate(_containers(spec, "initContainers")):
        if container.get("restartPolicy") == "Always":
            index = i + 1
    return index


def _app_containers(spec: Mapping[str, Any]) -> tuple[int, list[Mapping[str, Any]]]:
    """The insertion index, and the containers that start after the sidecar: they get the socket."""
    index = _insertion_index(spec)
    return index, [*_containers(spec, "initContainers")[index:], *_containers(spec, "containers")]


def _env(opts: PodOptions) -> dict[str, str]:
    env = {SOCKET_ENV: DEFAULT_SOCKET}
    if opts.proxy:
        env[PROXY_ENV] = f"http://127.0.0.1:{opts.proxy_port}"
    return env


def _uid(spec: Mapping[str, Any], container: Mapping[str, Any]) -> int | None:
    for sc in (container.get("securityContext"), spec.get("securityContext")):
        if isinstance(sc, Mapping) and isinstance(sc.get("runAsUser"), int):
            uid: int = sc["runAsUser"]
            return uid
    return None  # the image's USER: not known here


def _ops(pod: Pod, opts: PodOptions, injector: Injector, base: str) -> list[Op]:
    has_metadata = isinstance(pod.get("metadata"), Mapping)
    metadata: Mapping[str, Any] = pod.get("metadata") or {}
    spec: Mapping[str, Any] = pod.get("spec") or {}
    index, apps = _app_containers(spec)
    app_uids = {_uid(spec, c) for c in apps}
    pod_uid = (spec.get("securityContext") or {}).get("runAsUser")
    if len(app_uids) == 1 and (only := next(iter(app_uids))):
        uid = only  # one known, non-root uid for every app container: share it, keep the socket 0600
    else:
        uid = pod_uid if isinstance(pod_uid, int) and pod_uid != 0 else DEFAULT_UID
    shared = app_uids == {uid}
    ops: list[Op] = []
    env = _env(opts)
    n_init = len(_containers(spec, "initContainers"))
    for field, first, containers in (
        ("initContainers", index, _containers(spec, "initContainers")[index:]),
        ("containers", 0, _containers(spec, "containers")),
    ):
        for i, container in enumerate(containers, start=first):
            path = pointer(field, i)
            present = {e.get("name") for e in container.get("env") or []}
            entries = [{"name": k, "value": v} for k, v in env.items() if k not in present]
            ops.extend(_append(container, "env", f"{base}/spec{path}", entries))
            mount = {"name": SOCKET_VOLUME, "mountPath": SOCKET_DIR, "readOnly": True}
            ops.extend(_append(container, "volumeMounts", f"{base}/spec{path}", [mount]))
    sidecar = _sidecar(spec, opts, injector, uid, shared, app_uids)
    if n_init:
        ops.append({"op": "add", "path": f"{base}/spec/initContainers/{index}", "value": sidecar})
    else:
        ops.append({"op": "add", "path": f"{base}/spec/initContainers", "value": [sidecar]})
    ops.extend(_append(spec, "volumes", f"{base}/spec", _volumes(opts, injector)))
    annotations = metadata.get("annotations")
    if not has_metadata:
        ops.append(
            {"op": "add", "path": f"{base}/metadata", "value": {"annotations": {options.STATUS: "injected"}}}
        )
    elif isinstance(annotations, Mapping):
        path = f"{base}/metadata/annotations{pointer(options.STATUS)}"
        ops.append({"op": "add", "path": path, "value": "injected"})
    else:
        ops.append(
            {"op": "add", "path": f"{base}/metadata/annotations", "value": {options.STATUS: "injected"}}
        )
    return ops


def _append(parent: Mapping[str, Any], field: str, path: str, items: list[Any]) -> list[Op]:
    if not items:
        return []
    if isinstance(parent.get(field), list):
        return [{"op": "add", "path": f"{path}/{field}/-", "value": item} for item in items]
    return [{"op": "add", "path": f"{path}/{field}", "value": items}]


def _volumes(opts: PodOptions, injector: Injector) -> list[dict[str, Any]]:
    audience = opts.oidc_audience or injector.oidc_audience or injector.auth_url
    projection = {"audience": audience, "expirationSeconds": opts.oidc_expiration, "path": TOKEN_FILE}
    return [
        {"name": TOKEN_VOLUME, "projected": {"sources": [{"serviceAccountToken": projection}]}},
        # Memory: the socket and any token file never touch the node's disk.
        {"name": SOCKET_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
    ]


def _sidecar(
    spec: Mapping[str, Any],
    opts: PodOptions,
    injector: Injector,
    uid: int,
    shared: bool,
    app_uids: set[int | None],
) -> dict[str, Any]:
    args = [
        f"--auth-url={injector.auth_url}",
        f"--api-url={injector.api_url}",
        f"--identity={opts.identity}",
        f"--id-token-file={TOKEN_DIR}/{TOKEN_FILE}",
        f"--socket={DEFAULT_SOCKET}",
        # On the pod's address: the kubelet's probes come from outside the pod. It serves no token.
        f"--metrics-listen=0.0.0.0:{opts.metrics_port}",
    ]
    args += [f"--audience={audience}" for audience in opts.audiences]
    if opts.proxy:
        args.append(f"--proxy-listen=127.0.0.1:{opts.proxy_port}")
    for name, audience in opts.token_files:
        args.append(f"--token-file={SOCKET_DIR}/{name}" + (f"={audience}" if audience else ""))
    if not shared:
        # The app containers run as other (or unknown) users. The volume is mounted only in this
        # pod's containers, the same boundary as the proxy on the pod's loopback.
        args.append("--socket-mode=0666")
        if opts.token_files:
            args.append("--token-file-mode=0644")
        if None not in app_uids:
            known = sorted(u for u in app_uids if u is not None)
            args.append("--socket-allow-uid=" + ",".join(map(str, known)))

    def probe(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": opts.metrics_port}}

    security: dict[str, Any] = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if not (spec.get("securityContext") or {}).get("runAsGroup"):
        security["runAsGroup"] = DEFAULT_UID
    return {
        "name": CONTAINER,
        "image": opts.image or injector.image,
        "restartPolicy": "Always",
        "args": args,
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": opts.metrics_port, "protocol": "TCP"}],
        # The app containers start only once this passes: once a token is held.
        "startupProbe": {**probe("/readyz"), "periodSeconds": 1, "failureThreshold": 120},
        "readinessProbe": {
            **probe("/readyz"),
            "periodSeconds": 10,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            **probe("/healthz"),
            "periodSeconds": 10,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "resources": {
            "requests": {"cpu": opts.cpu_request, "memory": opts.memory_request},
            "limits": {"cpu": opts.cpu_limit, "memory": opts.memory_limit},
        },
        "securityContext": security,
        "volumeMounts": [
            {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True},
            {"name": SOCKET_VOLUME, "mountPath": SOCKET_DIR},
        ],
    }


def apply(document: dict[str, Any], ops: Sequence[Op]) -> None:
    """Apply ``add`` operations (as ``mutate`` makes them) to ``document`` in place."""
    for op in ops:
        assert op["op"] == "add", op
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = document
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            if last == "-":
                target.append(op["value"])
            else:
                target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
