"""The settings of ``tokenrelay agent``, declared once as ``sidecar.settings.OPTIONS`` declares run's: flags,
environment names and the generated reference (docs/agent.md) come from this table. The options it
shares with run are run's own entries; ``socket`` and ``socket_mode`` are the agent's, since its
defaults differ (a host directory every pod of the node mounts)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from ..lite.names import DEFAULT_AGENT_SOCKET, where
from ..options import Option, read_options
from ..sidecar.settings import OPTIONS_BY_NAME

# Every pod of the node connects, whatever its uid: what admits a caller is its token, not its uid.
AGENT_SOCKET_MODE = 0o666
DEFAULT_MAX_EXCHANGES_PER_SECOND = 20
DEFAULT_MAX_REQUESTS_PER_CONNECTION = 100
# A pod's clients ask for a token they will use for minutes: 50 a second is far above what a busy
# pod's credential helpers need (the bench's 500/s are spread over 110 pods), and a burst of 100
# lets a pod start many clients at once.
DEFAULT_MAX_REQUESTS_PER_POD = 50
DEFAULT_POD_REQUEST_BURST = 100
# A quarter of the node's default budget: four accounts asking at once cannot starve the rest.
DEFAULT_MAX_EXCHANGES_PER_ACCOUNT = 5
DEFAULT_REFUSAL_TTL = 30.0
DEFAULT_MAX_CACHE_ENTRIES = 4096
# A retired (compromised) key lives on at most this long; one small read per node a minute is
# 17 reads/s for 1,000 nodes, served from kube-apiserver's memory: less than the pod watches cost.
DEFAULT_CLUSTER_JWKS_REFRESH = 60.0
# A pod writes its request head on a local socket in microseconds: 10 s is for a starved node, and
# what bounds a flood's memory is the connection cap, not this.
DEFAULT_HEAD_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 30.0
# About 6.4 KiB of the agent's memory each while unfinished (bench/agent_flood.py): 1024 are under
# 7 MiB, for 110 pods (the kubelet's default limit) asking at once with room to spare; one uid may
# hold an eighth.
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_MAX_CONNECTIONS_PER_PEER = 128

AGENT_OPTIONS: tuple[Option, ...] = (
    Option(
        "socket",
        "Unix socket serving the local API, in a host directory that opted-in pods mount read-only.",
        kind="path",
        default=DEFAULT_AGENT_SOCKET,
        metavar="PATH",
    ),
    Option(
        "socket_mode",
        "Permission bits of the socket, octal (every pod of the node connects: its token admits it).",
        kind="mode",
        default=AGENT_SOCKET_MODE,
        metavar="MODE",
    ),
    Option(
        "listen",
        "Also serve the local API over TCP on HOST:PORT, for clients that cannot use a Unix socket.",
        kind="hostport",
        metavar="HOST:PORT",
    ),
    Option(
        "node_name",
        "This node's name (the DaemonSet sets it from spec.nodeName): a pod's token must name it.",
        required=True,
        metavar="NAME",
    ),
    Option(
        "cluster_jwks_file",
        "The cluster's service-account signing keys (JWKS) from this file; else the API server's "
        "/openid/v1/jwks with in-cluster credentials.",
        kind="path",
        metavar="FILE",
    ),
    Option(
        "cluster_jwks_refresh",
        "Seconds between reads of the cluster's keys: a key the cluster retires is trusted at most "
        "this long (a token naming an unknown key is read for at once, at most every 30 s).",
        kind="seconds",
        default=DEFAULT_CLUSTER_JWKS_REFRESH,
        metavar="SECONDS",
    ),
    Option(
        "cluster_issuer",
        "Issuer of the pods' tokens (default: the API server's /.well-known/openid-configuration; "
        "required with --cluster-jwks-file).",
        metavar="URL",
    ),
    Option(
        "pod_token_audience",
        "Audience a pod's projected token must carry (default: the --auth-url, the token service's).",
        metavar="AUD",
    ),
    Option(
        "max_exchanges_per_second",
        "Most exchanges this node's agent starts per second, all keys together.",
        kind="int",
        default=DEFAULT_MAX_EXCHANGES_PER_SECOND,
        metavar="N",
    ),
    Option(
        "max_requests_per_connection",
        "Most requests one client connection may make per second (then 429).",
        kind="int",
        default=DEFAULT_MAX_REQUESTS_PER_CONNECTION,
        metavar="N",
    ),
    Option(
        "max_requests_per_pod",
        "Most requests one pod (its verified token's uid) may make per second, all its connections "
        "together (then 429 POD_RATE_LIMITED with Retry-After).",
        kind="int",
        default=DEFAULT_MAX_REQUESTS_PER_POD,
        metavar="N",
    ),
    Option(
        "pod_request_burst",
        "Requests a pod may make at once beyond its --max-requests-per-pod rate.",
        kind="int",
        default=DEFAULT_POD_REQUEST_BURST,
        metavar="N",
    ),
    Option(
        "max_exchanges_per_account",
        "Most exchanges one service account's keys start per second (its share of "
        "--max-exchanges-per-second); more wait.",
        kind="int",
        default=DEFAULT_MAX_EXCHANGES_PER_ACCOUNT,
        metavar="N",
    ),
    Option(
        "refusal_ttl",
        "Seconds a refusal by the token service (a 4xx) of a (service account, identity, audience) "
        "is answered from memory, without another exchange.",
        kind="seconds",
        default=DEFAULT_REFUSAL_TTL,
        metavar="SECONDS",
    ),
    Option(
        "head_timeout",
        "Seconds a client may take to send a request head, from its first byte (then 408, closed).",
        kind="seconds",
        default=DEFAULT_HEAD_TIMEOUT,
        metavar="SECONDS",
    ),
    Option(
        "idle_timeout",
        "Seconds a kept-alive client connection may wait without a request before it is closed.",
        kind="seconds",
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
    ),
    Option(
        "max_connections",
        "Most client connections open at once, all pods together (more: 503, closed at once).",
        kind="int",
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
    ),
    Option(
        "max_connections_per_peer",
        "Most client connections open at once from one peer uid (SO_PEERCRED; over TCP, one "
        "address) (more: 429, closed at once).",
        kind="int",
        default=DEFAULT_MAX_CONNECTIONS_PER_PEER,
        metavar="N",
    ),
    Option(
        "max_cache_entries",
        "Most (service account, identity, audience) tokens held; the least recently asked for goes.",
        kind="int",
        default=DEFAULT_MAX_CACHE_ENTRIES,
        metavar="N",
    ),
    Option(
        "startup_taint",
        "Once ready, remove the tokenrelay.dev/agent-not-ready:NoSchedule taint from this node.",
        kind="bool",
        default=False,
    ),
)
# Run's options the agent takes as they are.
SHARED = (
    "auth_url",
    "api_url",
    "exchange_timeout",
    "wait_timeout",
    "metrics_listen",
    "shutdown_grace",
    "log_format",
    "log_level",
)
ALL_OPTIONS: tuple[Option, ...] = (*AGENT_OPTIONS, *(OPTIONS_BY_NAME[name] for name in SHARED))


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The validated settings of ``tokenrelay agent``."""

    auth_url: str
    api_url: str
    node_name: str
    socket: str = DEFAULT_AGENT_SOCKET
    socket_mode: int = AGENT_SOCKET_MODE
    listen: tuple[str, int] | None = None
    cluster_jwks_file: str | None = None
    cluster_jwks_refresh: float = DEFAULT_CLUSTER_JWKS_REFRESH
    cluster_issuer: str | None = None
    pod_token_audience: str | None = None
    max_exchanges_per_second: int = DEFAULT_MAX_EXCHANGES_PER_SECOND
    max_requests_per_connection: int = DEFAULT_MAX_REQUESTS_PER_CONNECTION
    max_requests_per_pod: int = DEFAULT_MAX_REQUESTS_PER_POD
    pod_request_burst: int = DEFAULT_POD_REQUEST_BURST
    max_exchanges_per_account: int = DEFAULT_MAX_EXCHANGES_PER_ACCOUNT
    refusal_ttl: float = DEFAULT_REFUSAL_TTL
    head_timeout: float = DEFAULT_HEAD_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_peer: int = DEFAULT_MAX_CONNECTIONS_PER_PEER
    max_cache_entries: int = DEFAULT_MAX_CACHE_ENTRIES
    startup_taint: bool = False
    exchange_timeout: float = OPTIONS_BY_NAME["exchange_timeout"].default
    wait_timeout: float = OPTIONS_BY_NAME["wait_timeout"].default
    metrics_listen: tuple[str, int] | None = None
    shutdown_grace: float = OPTIONS_BY_NAME["shutdown_grace"].default
    log_format: str = "json"
    log_level: str = "info"

    @property
    def audience(self) -> str:
        """The audience a pod's token must carry."""
        return self.pod_token_audience or self.auth_url


def load(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> AgentSettings:
    """Flags and environment into AgentSettings; raises ConfigError naming the flag and variable."""
    values = read_options(ALL_OPTIONS, args, environ)
    for option in ALL_OPTIONS:
        if option.required and values[option.name] is None:
            raise ConfigError(f"{option.where()} is required: {option.help}")
    settings = AgentSettings(**values)
    if settings.cluster_jwks_file and not settings.cluster_issuer:
        raise ConfigError(
            f"{where('cluster_jwks_file')} needs {where('cluster_issuer')}: the issuer the pods' "
            "tokens carry (kube-apiserver's --service-account-issuer)"
        )
    if settings.socket_mode & 0o111:
        raise ConfigError(f"{where('socket_mode')}: {oct(settings.socket_mode)} sets execute bits; use 0666")
    return settings
