"""What a pod asks of the injector: the ``tokenrelay.dev/*`` annotations on its template, validated.

Every annotation is optional except the identity (which ``tokenrelay inject --identity`` may supply).
An unknown ``tokenrelay.dev/`` annotation is refused rather than ignored: a typo such as
``tokenrelay.dev/proxy-prot`` would otherwise silently give a pod something it did not ask for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InjectionRefused

PREFIX = "tokenrelay.dev/"
INJECT_LABEL = PREFIX + "inject"  # "enabled" on a namespace or pod template opts in; "disabled" opts out
STATUS = PREFIX + "status"  # set to "injected" by the mutation: what makes it idempotent

IDENTITY = PREFIX + "identity"
AUDIENCES = PREFIX + "audiences"
PROXY = PREFIX + "proxy"
PROXY_PORT = PREFIX + "proxy-port"
METRICS_PORT = PREFIX + "metrics-port"
TOKEN_FILES = PREFIX + "token-files"
OIDC_AUDIENCE = PREFIX + "oidc-audience"
OIDC_EXPIRATION = PREFIX + "oidc-expiration-seconds"
CPU_REQUEST = PREFIX + "cpu-request"
CPU_LIMIT = PREFIX + "cpu-limit"
MEMORY_REQUEST = PREFIX + "memory-request"
MEMORY_LIMIT = PREFIX + "memory-limit"
IMAGE = PREFIX + "image"

# name -> what it takes (the documentation of docs/kubernetes.md says the same)
ANNOTATIONS: dict[str, str] = {
    IDENTITY: "uid of the identity to exchange the pod's token for (required)",
    AUDIENCES: "further audiences to keep a token fresh for, comma-separated",
    PROXY: '"on" or "off" (default off): run the token-injecting proxy on 127.0.0.1',
    PROXY_PORT: "the proxy's port on the pod's loopback (default 8080)",
    METRICS_PORT: "port of /metrics, /healthz and /readyz, which the probes use (default 9090)",
    TOKEN_FILES: "NAME[=AUDIENCE],... files written in /var/run/tokenrelay for tools that read a file",
    OIDC_AUDIENCE: "audience of the projected service-account token (default the auth URL)",
    OIDC_EXPIRATION: "expirationSeconds of the projected token (default 600, at least 600)",
    CPU_REQUEST: "the sidecar's CPU request (default 10m)",
    CPU_LIMIT: "the sidecar's CPU limit (default 200m)",
    MEMORY_REQUEST: "the sidecar's memory request (default 48Mi)",
    MEMORY_LIMIT: "the sidecar's memory limit (default 128Mi)",
    IMAGE: "the sidecar's image (default the injector's --image)",
}
KNOWN = frozenset(ANNOTATIONS) | {STATUS}

DEFAULT_RESOURCES = {"cpu": ("10m", "200m"), "memory": ("48Mi", "128Mi")}
# Kubernetes' resource.Quantity: a decimal number and an optional SI or binary suffix.
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
MIN_EXPIRATION = 600  # the API server refuses a projected token of less than ten minutes
MAX_EXPIRATION = 2**32


_SUFFIX = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_SUFFIX.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60})


def _amount(quantity: str) -> float:
    match = _QUANTITY.match(quantity)
    assert match is not None
    suffix = match.group(2) or ""
    return float(quantity[: len(quantity) - len(suffix)]) * _SUFFIX[suffix]


@dataclass(frozen=True, slots=True)
class PodOptions:
    """The validated ``tokenrelay.dev/*`` annotations of one pod."""

    identity: str
    audiences: tuple[str, ...] = ()
    proxy: bool = False
    proxy_port: int = 8080
    metrics_port: int = 9090
    token_files: tuple[tuple[str, str | None], ...] = ()  # (file name, audience or None for the API's)
    oidc_audience: str | None = None
    oidc_expiration: int = 600
    cpu: tuple[str, str] = DEFAULT_RESOURCES["cpu"]
    memory: tuple[str, str] = DEFAULT_RESOURCES["memory"]
    image: str | None = None


def parse(annotations: Mapping[str, object], default_identity: str | None = None) -> PodOptions:
    """PodOptions from a pod's annotations; raises InjectionRefused naming every bad annotation at once."""
    problems: list[str] = []
    unknown = sorted(k for k in annotations if k.startswith(PREFIX) and k not in KNOWN)
    for key in unknown:
        problems.append(f"unknown annotation {key}; known: {', '.join(sorted(ANNOTATIONS))}")

    def text(key: str) -> str | None:
        value = annotations.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            problems.append(f"annotation {key} must be a non-empty string")
            return None
        return value.strip()

    def port(key: str, default: int) -> int:
        value = text(key)
        if value is None:
            return default
        if not value.isdigit() or not 1 <= int(value) <= 65535:
            problems.append(f"annotation {key}: {value!r} is not a port number (1-65535)")
            return default
        return int(value)

    def quantity(key: str, default: str) -> str:
        value = text(key)
        if value is None:
            return default
        if not _QUANTITY.match(value):
            problems.append(f"annotation {key}: {value!r} is not a Kubernetes quantity such as 100m or 64Mi")
            return default
        return value

    identity = text(IDENTITY) or default_identity
    if identity is None and IDENTITY not in annotations:
        problems.append(
            f"no identity: add the annotation {IDENTITY}: <identity uid> to the pod template "
            "(or give tokenrelay inject --identity)"
        )
    audiences = tuple(dict.fromkeys(a.strip() for a in (text(AUDIENCES) or "").split(",") if a.strip()))
    proxy = False
    proxy_text = text(PROXY)
    if proxy_text is not None:
        if proxy_text.lower() in ("on", "true", "enabled", "yes"):
            proxy = True
        elif proxy_text.lower() not in ("off", "false", "disabled", "no"):
            problems.append(f'annotation {PROXY}: {proxy_text!r} is neither "on" nor "off"')
    proxy_port = port(PROXY_PORT, 8080)
    metrics_port = port(METRICS_PORT, 9090)
    if proxy and proxy_port == metrics_port:
        problems.append(
            f"annotations {PROXY_PORT} and {METRICS_PORT} both say {proxy_port}; choose two ports"
        )
    token_files: list[tuple[str, str | None]] = []
    for spec in (text(TOKEN_FILES) or "").split(","):
        if not spec.strip():
            continue
        name, sep, audience = (part.strip() for part in spec.partition("="))
        if not _FILE_NAME.match(name) or name in (".", "..", "tokenrelay.sock"):
            problems.append(
                f"annotation {TOKEN_FILES}: {name!r} is not a plain file name (letters, digits, '.', '_', "
                "'-'; not tokenrelay.sock): the files are written in /var/run/tokenrelay"
            )
        elif sep and audience not in audiences:
            problems.append(
                f"annotation {TOKEN_FILES}: audience {audience!r} of {name} is not kept fresh; "
                f"add it to {AUDIENCES}"
            )
        elif any(name == seen for seen, _ in token_files):
            problems.append(f"annotation {TOKEN_FILES}: {name} is named twice")
        else:
            token_files.append((name, audience if sep else None))
    expiration = 600
    expiration_text = text(OIDC_EXPIRATION)
    if expiration_text is not None:
        if not expiration_text.isdigit() or not MIN_EXPIRATION <= int(expiration_text) <= MAX_EXPIRATION:
            problems.append(
                f"annotation {OIDC_EXPIRATION}: {expiration_text!r} is not a number of seconds "
                f"from {MIN_EXPIRATION} (the least Kubernetes issues)"
            )
        else:
            expiration = int(expiration_text)
    cpu = (
        quantity(CPU_REQUEST, DEFAULT_RESOURCES["cpu"][0]),
        quantity(CPU_LIMIT, DEFAULT_RESOURCES["cpu"][1]),
    )
    memory = (
        quantity(MEMORY_REQUEST, DEFAULT_RESOURCES["memory"][0]),
        quantity(MEMORY_LIMIT, DEFAULT_RESOURCES["memory"][1]),
    )
    for resource, (request, limit) in (("cpu", cpu), ("memory", memory)):
        if _amount(request) > _amount(limit):
            problems.append(
                f"the sidecar's {resource} request {request} is more than its limit {limit}; "
                f"lower {PREFIX}{resource}-request or raise {PREFIX}{resource}-limit"
            )
    image = text(IMAGE)
    oidc_audience = text(OIDC_AUDIENCE)
    if problems:
        raise InjectionRefused("; ".join(problems))
    assert identity is not None
    return PodOptions(
        identity=identity,
        audiences=audiences,
        proxy=proxy,
        proxy_port=proxy_port,
        metrics_port=metrics_port,
        token_files=tuple(token_files),
        oidc_audience=oidc_audience,
        oidc_expiration=expiration,
        cpu=cpu,
        memory=memory,
        image=image,
    )
