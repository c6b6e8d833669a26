"""What a pod asks of the injector: the ``tokenrelay.dev/*`` annotations on its template, validated.

``TABLE`` is the one catalogue (vault-k8s's ``annotations.go``): each row names an annotation, the
``PodOptions`` field it fills, its kind (which picks its validator), its default and its meaning. The
annotation table of docs/kubernetes.md is generated from it (``python -m tokenrelay.docgen``), and a
test pins that ``PodOptions``' defaults are the rows'. A new annotation is one row, one ``PodOptions``
field and what ``mutation`` does with it.

Every annotation is optional except the identity (which ``tokenrelay inject --identity`` may supply).
An unknown ``tokenrelay.dev/`` annotation is refused rather than ignored: a typo such as
``tokenrelay.dev/proxy-prot`` would otherwise silently give a pod something it did not ask for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InjectionRefused
from ..options import choose, split_list

PREFIX = "tokenrelay.dev/"
INJECT_LABEL = PREFIX + "inject"  # "enabled" on a namespace or pod template opts in; "disabled" opts out
STATUS = PREFIX + "status"  # set to "injected" by the mutation: what makes it idempotent
# The node taint `tokenrelay agent --startup-taint` removes once the agent serves (docs/agent.md).
AGENT_NOT_READY = PREFIX + "agent-not-ready"

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
MODE = PREFIX + "mode"

# The defaults, named once: the table's rows and PodOptions' fields both read them.
SIDECAR, AGENT = "sidecar", "agent"
DEFAULT_MODE = SIDECAR
DEFAULT_PROXY = False
DEFAULT_PROXY_PORT = 8080
DEFAULT_METRICS_PORT = 9090
DEFAULT_OIDC_EXPIRATION = 600
DEFAULT_CPU_REQUEST = "10m"
DEFAULT_CPU_LIMIT = "200m"
DEFAULT_MEMORY_REQUEST = "48Mi"
DEFAULT_MEMORY_LIMIT = "128Mi"

MIN_EXPIRATION = 600  # the API server refuses a projected token of less than ten minutes
MAX_EXPIRATION = 2**32
# Kubernetes' resource.Quantity: a decimal number and an optional SI or binary suffix.
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_ON = ("on", "true", "enabled", "yes")
_OFF = ("off", "false", "disabled", "no")

Kind = Literal["text", "list", "on/off", "port", "seconds", "quantity", "choice", "files"]


@dataclass(frozen=True, slots=True)
class Annotation:
    """One ``tokenrelay.dev/*`` annotation: where it goes, how it is checked, and its documentation."""

    name: str  # the whole annotation, tokenrelay.dev/...
    field: str  # the PodOptions field it fills
    kind: Kind  # picks the validator in _VALIDATORS
    help: str  # markdown: the "What" of docs/kubernetes.md
    default: Any = None
    shown_default: str | None = None  # the docs' Default cell, when the value alone does not say it
    choices: tuple[str, ...] = ()  # of a "choice"; the first is usually the default
    minimum: int = 0  # of "seconds"
    minimum_why: str = ""  # said in the error when a value is below minimum
    sidecar_only: bool = False  # configures the sidecar: refused with tokenrelay.dev/mode: agent

    def what_cell(self) -> str:
        """The What column of the docs' table."""
        return self.help + (" (sidecar mode only)" if self.sidecar_only else "")

    def default_cell(self) -> str:
        """The Default column of the docs' table."""
        if self.shown_default is not None:
            return self.shown_default
        if self.default in (None, ()):
            return "none"
        if isinstance(self.default, bool):
            return "`on`" if self.default else "`off`"
        return f"`{self.default}`"


TABLE: tuple[Annotation, ...] = (
    Annotation(
        IDENTITY,
        "identity",
        "text",
        "uid of the identity to exchange the pod's token for (`--identity`)",
        shown_default="(required)",
    ),
    Annotation(
        MODE,
        "mode",
        "choice",
        "`sidecar`: a relay container in the pod. `agent`: no container; the pod's clients ask the node's "
        "`tokenrelay agent` through its socket, sending the pod's projected token (docs/agent.md says "
        "which to pick)",
        DEFAULT_MODE,
        choices=(SIDECAR, AGENT),
    ),
    Annotation(
        AUDIENCES,
        "audiences",
        "list",
        "Further audiences to keep a token fresh for, comma-separated (`--audience`)",
        default=(),
        sidecar_only=True,
    ),
    Annotation(
        PROXY,
        "proxy",
        "on/off",
        "`on`: run the token-injecting proxy on `127.0.0.1`, and set `TOKENRELAY_PROXY_URL` in the app "
        "containers",
        default=DEFAULT_PROXY,
        sidecar_only=True,
    ),
    Annotation(
        PROXY_PORT,
        "proxy_port",
        "port",
        "The proxy's port on the pod's loopback",
        DEFAULT_PROXY_PORT,
        sidecar_only=True,
    ),
    Annotation(
        METRICS_PORT,
        "metrics_port",
        "port",
        "Port of `/metrics`, `/healthz` and `/readyz` on the pod's address; the probes use it",
        DEFAULT_METRICS_PORT,
        sidecar_only=True,
    ),
    Annotation(
        TOKEN_FILES,
        "token_files",
        "files",
        "`NAME[=AUDIENCE],...`: token files written in `/var/run/tokenrelay/NAME` for tools that read a "
        "file (`--token-file`); an audience must also be in `tokenrelay.dev/audiences`",
        default=(),
        sidecar_only=True,
    ),
    Annotation(
        OIDC_AUDIENCE,
        "oidc_audience",
        "text",
        "Audience of the projected service-account token: what the token service (and the agent's "
        "`--pod-token-audience`) expects",
        shown_default="the auth URL",
    ),
    Annotation(
        OIDC_EXPIRATION,
        "oidc_expiration",
        "seconds",
        f"Life of the projected token; at least {MIN_EXPIRATION}. The kubelet rewrites the file at 80% of it",
        DEFAULT_OIDC_EXPIRATION,
        minimum=MIN_EXPIRATION,
        minimum_why="the least Kubernetes issues",
    ),
    Annotation(
        CPU_REQUEST,
        "cpu_request",
        "quantity",
        "The sidecar's CPU request",
        DEFAULT_CPU_REQUEST,
        sidecar_only=True,
    ),
    Annotation(
        CPU_LIMIT, "cpu_limit", "quantity", "The sidecar's CPU limit", DEFAULT_CPU_LIMIT, sidecar_only=True
    ),
    Annotation(
        MEMORY_REQUEST,
        "memory_request",
        "quantity",
        "The sidecar's memory request (`bench/idle_rss.py` measures it idle: under 40 MiB, see the README)",
        DEFAULT_MEMORY_REQUEST,
        sidecar_only=True,
    ),
    Annotation(
        MEMORY_LIMIT,
        "memory_limit",
        "quantity",
        "The sidecar's memory limit",
        DEFAULT_MEMORY_LIMIT,
        sidecar_only=True,
    ),
    Annotation(
        IMAGE,
        "image",
        "text",
        "The sidecar's image, e.g. a mirror",
        shown_default="the injector's `--image`",
        sidecar_only=True,
    ),
)
ANNOTATIONS: dict[str, Annotation] = {row.name: row for row in TABLE}
KNOWN = frozenset(ANNOTATIONS) | {STATUS}
STATUS_HELP = "`injected`: the pod already has what the injector adds, in either mode (see idempotency below)"

_SUFFIX = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_SUFFIX.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60})


def _amount(quantity: str) -> float:
    match = _QUANTITY.match(quantity)
    assert match is not None
    suffix = match.group(2) or ""
    return float(quantity[: len(quantity) - len(suffix)]) * _SUFFIX[suffix]


@dataclass(frozen=True, slots=True)
class PodOptions:
    """The validated ``tokenrelay.dev/*`` annotations of one pod: one field per row of ``TABLE``."""

    identity: str
    mode: str = DEFAULT_MODE
    audiences: tuple[str, ...] = ()
    proxy: bool = DEFAULT_PROXY
    proxy_port: int = DEFAULT_PROXY_PORT
    metrics_port: int = DEFAULT_METRICS_PORT
    token_files: tuple[tuple[str, str | None], ...] = ()  # (file name, audience or None for the API's)
    oidc_audience: str | None = None
    oidc_expiration: int = DEFAULT_OIDC_EXPIRATION
    cpu_request: str = DEFAULT_CPU_REQUEST
    cpu_limit: str = DEFAULT_CPU_LIMIT
    memory_request: str = DEFAULT_MEMORY_REQUEST
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    image: str | None = None


# Validators: (row, stripped non-empty text) -> value. A ValueError's args are the problems, each
# said after "annotation NAME: ". A list and a choice are read as every command's options are
# (``tokenrelay.options``); the others are the annotations' own kinds.


def _text(row: Annotation, text: str) -> str:
    return text


def _on_off(row: Annotation, text: str) -> bool:
    if text.lower() in _ON:
        return True
    if text.lower() in _OFF:
        return False
    raise ValueError(f'{text!r} is neither "on" nor "off"')


def _port(row: Annotation, text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def _seconds(row: Annotation, text: str) -> int:
    if not text.isdigit() or not row.minimum <= int(text) <= MAX_EXPIRATION:
        why = f" ({row.minimum_why})" if row.minimum_why else ""
        raise ValueError(f"{text!r} is not a number of seconds from {row.minimum}{why}")
    return int(text)


def _quantity(row: Annotation, text: str) -> str:
    if not _QUANTITY.match(text):
        raise ValueError(f"{text!r} is not a Kubernetes quantity such as 100m or 64Mi")
    return text


def _files(row: Annotation, text: str) -> tuple[tuple[str, str | None], ...]:
    files: dict[str, str | None] = {}
    problems: list[str] = []
    for spec in text.split(","):
        if not spec.strip():
            continue
        name, sep, audience = (part.strip() for part in spec.partition("="))
        if not _FILE_NAME.match(name) or name in (".", "..", "tokenrelay.sock"):
            problems.append(
                f"{name!r} is not a plain file name (letters, digits, '.', '_', '-'; not tokenrelay.sock): "
                "the files are written in /var/run/tokenrelay"
            )
        elif name in files:
            problems.append(f"{name} is named twice")
        else:
            files[name] = audience if sep else None
    if problems:
        raise ValueError(*problems)
    return tuple(files.items())


_VALIDATORS: dict[Kind, Callable[[Annotation, str], Any]] = {
    "text": _text,
    "list": lambda row, text: split_list(text),
    "on/off": _on_off,
    "port": _port,
    "seconds": _seconds,
    "quantity": _quantity,
    "choice": lambda row, text: choose(text, row.choices),
    "files": _files,
}


def check(row: Annotation, text: str) -> Any:
    """The value of one annotation, by its kind's validator; ValueError with each problem as an arg."""
    return _VALIDATORS[row.kind](row, text.strip())


def parse(annotations: Mapping[str, object], default_identity: str | None = None) -> PodOptions:
    """PodOptions from a pod's annotations; raises InjectionRefused naming every bad annotation at once."""
    problems = [
        f"unknown annotation {key}; known: {', '.join(sorted(ANNOTATIONS))}"
        for key in sorted(k for k in annotations if k.startswith(PREFIX) and k not in KNOWN)
    ]
    values: dict[str, Any] = {}
    for row in TABLE:
        value = annotations.get(row.name)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            problems.append(f"annotation {row.name} must be a non-empty string")
            continue
        try:
            values[row.field] = check(row, value)
        except ValueError as exc:
            problems += [f"annotation {row.name}: {problem}" for problem in exc.args]
    if IDENTITY not in annotations:
        if default_identity is None:
            problems.append(
                f"no identity: add the annotation {IDENTITY}: <identity uid> to the pod template "
                "(or give tokenrelay inject --identity)"
            )
        values["identity"] = default_identity
    options = PodOptions(**{**{row.field: row.default for row in TABLE}, **values})
    problems += _conflicts(options, annotations)
    if problems:
        raise InjectionRefused("; ".join(problems))
    return options


def _conflicts(options: PodOptions, annotations: Mapping[str, object]) -> list[str]:
    """Rules between annotations (each one valid alone)."""
    if options.mode == AGENT:
        return _agent_conflicts(options, annotations)
    problems = [
        f"annotation {TOKEN_FILES}: audience {audience!r} of {name} is not kept fresh; add it to {AUDIENCES}"
        for name, audience in options.token_files
        if audience is not None and audience not in options.audiences
    ]
    if options.proxy and options.proxy_port == options.metrics_port:
        problems.append(
            f"annotations {PROXY_PORT} and {METRICS_PORT} both say {options.proxy_port}; choose two ports"
        )
    for resource, request, limit in (
        ("cpu", options.cpu_request, options.cpu_limit),
        ("memory", options.memory_request, options.memory_limit),
    ):
        if _amount(request) > _amount(limit):
            problems.append(
                f"the sidecar's {resource} request {request} is more than its limit {limit}; "
                f"lower {PREFIX}{resource}-request or raise {PREFIX}{resource}-limit"
            )
    return problems


def _agent_conflicts(options: PodOptions, annotations: Mapping[str, object]) -> list[str]:
    """Agent mode adds no container: an annotation configuring the sidecar would be silently lost."""
    problems = []
    if options.proxy:
        problems.append(
            f"annotation {PROXY}: on needs the sidecar (the node agent has no token-injecting proxy); "
            f"remove it, or set {MODE}: {SIDECAR}"
        )
    if options.token_files:
        problems.append(
            f"annotation {TOKEN_FILES} needs the sidecar (the node agent writes no token files); remove it, "
            f"or set {MODE}: {SIDECAR}"
        )
    others = [
        row.name
        for row in TABLE
        if row.sidecar_only and row.name in annotations and row.name not in (PROXY, TOKEN_FILES)
    ]
    if others:
        problems.append(
            f"{MODE}: {AGENT} adds no sidecar, so {', '.join(others)} would configure nothing; remove "
            f"{'them' if len(others) > 1 else 'it'}, or set {MODE}: {SIDECAR}"
        )
    return problems
