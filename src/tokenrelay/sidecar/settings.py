"""Settings of ``tokenrelay run``: its table of options and the frozen ``Settings`` built from it.

The table is read by the options machine (``tokenrelay.options``): every row is a flag ``--name``, an
environment variable ``TOKENRELAY_NAME`` and a key ``name`` (or ``name`` with dashes) in the TOML file
given by ``--config``; precedence is flag > env > file > default. argparse, the environment, the file
and the configuration reference in docs/operations.md are all derived from it. ``table`` puts run's
own rows together with those each family declares (the OIDC sources', the proxy's ``Limits``', the
--render formats'). The checks that involve more than one option live
with the family that owns them (``idsources.registry.check_settings`` for the OIDC sources,
``render.specs.check_settings`` for the --render files); those of the serving parts are here.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..lite.names import (
    DEFAULT_EXCHANGE_TIMEOUT,
    DEFAULT_ID_TOKEN_FILE,
    DEFAULT_MODE,
    DEFAULT_PROXY_MAX_CONNECTIONS,
    DEFAULT_PROXY_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_SOCKET,
    DEFAULT_WAIT_TIMEOUT,
    ENV_PREFIX,
    where,
)
from ..lite.netloc import is_loopback
from ..options import LOG_OPTIONS, Option, add_options, read, read_toml
from ..proxy.limits import options as limit_options
from ..render.specs import check_settings as check_renders
from ..render.specs import options_rows as render_options
from ..tokens.idsources.registry import check_settings as check_source
from ..tokens.idsources.registry import options_rows as source_options

# Keys a shared TOML file may hold for other tokenrelay commands.
FOREIGN_KEYS: frozenset[str] = frozenset()

# Run's own rows, by part; ``table`` puts them together with the families' rows.
_EXCHANGE: tuple[Option, ...] = (
    Option(
        "auth_url",
        "Token service base URL ({auth_url}); exchanges go to {auth_url}/sts/exchange.",
        kind="url",
        required=True,
        metavar="URL",
    ),
    Option(
        "api_url",
        "API base URL ({base_url}); always the first audience, and the proxy's upstream.",
        kind="url",
        required=True,
        metavar="URL",
    ),
    Option(
        "identity",
        "uid of the assumable identity to exchange the OIDC token for.",
        required=True,
        metavar="UID",
    ),
    Option(
        "audience",
        "Further audience to keep a token fresh for (repeatable), e.g. a registry host.",
        kind="list",
        repeatable=True,
        default=(),
        metavar="AUD",
    ),
    Option(
        "exchange_timeout",
        "Total timeout of one exchange, in seconds.",
        kind="seconds",
        default=DEFAULT_EXCHANGE_TIMEOUT,
        metavar="SECONDS",
    ),
    Option(
        "wait_timeout",
        "How long a caller waits when no valid token is held yet, in seconds.",
        kind="seconds",
        default=DEFAULT_WAIT_TIMEOUT,
        metavar="SECONDS",
    ),
)
_LOCAL_API: tuple[Option, ...] = (
    Option(
        "socket", "Unix socket serving the local API.", kind="path", default=DEFAULT_SOCKET, metavar="PATH"
    ),
    Option(
        "socket_mode",
        "Permission bits of the socket, octal.",
        kind="mode",
        default=DEFAULT_MODE,
        metavar="MODE",
    ),
    Option(
        "socket_allow_uid",
        "Only these peer uids may use the socket (comma-separated).",
        kind="uids",
        default=(),
        metavar="UID[,UID...]",
    ),
    Option(
        "socket_allow_gid",
        "Only peers in these gids may use the socket (comma-separated).",
        kind="uids",
        default=(),
        metavar="GID[,GID...]",
    ),
    Option(
        "shutdown_grace",
        "On SIGTERM, how long requests in flight may take to finish, in seconds.",
        kind="seconds",
        default=DEFAULT_SHUTDOWN_GRACE,
        metavar="SECONDS",
    ),
)
_PROXY: tuple[Option, ...] = (
    Option(
        "proxy_listen",
        "Serve the token-injecting reverse proxy on HOST:PORT (off when unset; e.g. 127.0.0.1:8080).",
        kind="hostport",
        metavar="HOST:PORT",
    ),
    Option(
        "proxy_allow_remote",
        "Allow --proxy-listen on an address that is not loopback.",
        kind="bool",
        default=False,
    ),
    Option(
        "upstream_ca",
        "Extra CA bundle (PEM) for an HTTPS upstream; system CAs otherwise.",
        kind="path",
        metavar="FILE",
    ),
)
_PRODUCTION: tuple[Option, ...] = (
    Option(
        "metrics_listen",
        "Serve /metrics, /healthz and /readyz over TCP on HOST:PORT.",
        kind="hostport",
        metavar="HOST:PORT",
    ),
    Option(
        "token_file",
        "Also write the token to PATH (for AUDIENCE, default the API's) on every refresh (repeatable).",
        kind="list",
        repeatable=True,
        default=(),
        metavar="PATH[=AUDIENCE]",
    ),
    Option(
        "token_file_mode",
        "Permission bits of --token-file files, octal.",
        kind="mode",
        default=DEFAULT_MODE,
        metavar="MODE",
    ),
    # files other tools read
    Option(
        "hosts",
        "Hosts that get a token, host[:port][=audience] (comma-separated, repeatable; the audience "
        "defaults to host[:port]): the credential helpers' list. The --render files write them, "
        "exec's --configure sets its clients up for them, and with either their audiences are kept fresh.",
        kind="list",
        repeatable=True,
        default=(),
        metavar="HOST[=AUD]",
    ),
)
_ONCE = Option(
    "once",
    "Exchange once (retrying a token-service outage within --wait-timeout), write the "
    "--token-file sinks, and exit.",
    kind="bool",
    default=False,
)


def table() -> tuple[Option, ...]:
    """Every row of ``tokenrelay run``, in the order of its docs: its own, and each family's as the
    family's table holds them (the sources' rows with their names as --id-token-source's choices,
    the proxy's ``Limits`` rows, the --render rows with each format's own), read afresh."""
    return (
        *_EXCHANGE,
        *source_options(),
        *_LOCAL_API,
        *_PROXY,
        *limit_options(),
        *_PRODUCTION,
        *render_options(),
        _ONCE,
        *LOG_OPTIONS,
    )


OPTIONS = table()
OPTIONS_BY_NAME = {option.name: option for option in OPTIONS}


@dataclass(frozen=True, slots=True)
class Settings:
    """The validated settings of ``tokenrelay run``."""

    auth_url: str
    api_url: str
    identity: str
    audience: tuple[str, ...] = ()
    exchange_timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    id_token_source: str = "file"  # a name in idsources.SOURCES; "env" when only --id-token-env is set
    id_token_file: str = DEFAULT_ID_TOKEN_FILE
    id_token_env: str | None = None
    id_token_audience: str | None = None
    azure_service_connection_id: str | None = None
    socket: str = DEFAULT_SOCKET
    socket_mode: int = DEFAULT_MODE
    socket_allow_uid: tuple[int, ...] = ()
    socket_allow_gid: tuple[int, ...] = ()
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    proxy_listen: tuple[str, int] | None = None
    proxy_allow_remote: bool = False
    upstream_ca: str | None = None
    proxy_timeout: float = DEFAULT_PROXY_TIMEOUT
    proxy_max_connections: int = DEFAULT_PROXY_MAX_CONNECTIONS
    metrics_listen: tuple[str, int] | None = None
    token_file: tuple[str, ...] = ()
    token_file_mode: int = DEFAULT_MODE
    hosts: tuple[str, ...] = ()
    render: tuple[str, ...] = ()
    render_mode: int = DEFAULT_MODE
    render_maven_ids: tuple[str, ...] = ()
    once: bool = False
    log_format: str = "json"
    log_level: str = "info"
    config: str | None = field(default=None, compare=False)

    @property
    def audiences(self) -> tuple[str, ...]:
        """Every audience kept fresh: the API's first, then each --audience once, then those of the
        --hosts the --render files write (a render needs their tokens)."""
        rendered: tuple[str, ...] = ()
        if self.render:
            from ..helpers.hosts import parse_list

            rendered = tuple(host.audience for host in parse_list(self.hosts, where("hosts")))
        return tuple(dict.fromkeys((self.api_url, *self.audience, *rendered)))

    @property
    def token_files(self) -> tuple[tuple[str, str], ...]:
        """``(path, audience)`` for each --token-file."""
        sinks = []
        for spec in self.token_file:
            path, sep, audience = spec.partition("=")
            sinks.append((path, audience if sep else self.api_url))
        return tuple(sinks)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every option of ``tokenrelay run`` to ``parser``."""
    parser.add_argument(
        "--config", metavar="FILE", help=f"TOML file with any of these settings (env {ENV_PREFIX}CONFIG)."
    )
    add_options(parser, table())


def load(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Merge flags, environment and the TOML file into validated Settings; raises ConfigError."""
    env = os.environ if environ is None else environ
    config_path = getattr(args, "config", None) or env.get(ENV_PREFIX + "CONFIG")
    rows = table()  # afresh: a member registered since (a test's) is read as the others
    file_values = read_toml(config_path, rows, FOREIGN_KEYS) if config_path else {}
    values = read(rows, args, env, file_values)
    # --id-token-env alone is enough to choose the env source
    values.setdefault("id_token_source", "env" if values.get("id_token_env") else "file")
    settings = Settings(**values, config=config_path)
    _check(settings)
    return settings


def _check(settings: Settings) -> None:
    """Rules that involve more than one option: each family's, then the serving parts'."""
    check_source(settings)
    if (
        settings.proxy_listen
        and not settings.proxy_allow_remote
        and not is_loopback(settings.proxy_listen[0])
    ):
        raise ConfigError(
            f"{where('proxy_listen')}: {settings.proxy_listen[0]} is not a "
            "loopback address; anyone who reaches it gets the token's access. Listen on 127.0.0.1, "
            f"or add {where('proxy_allow_remote')} if you mean it"
        )
    for spec in settings.token_file:
        path, _, audience = spec.partition("=")
        if not path:
            raise ConfigError(f"{where('token_file')}: {spec!r} has no path")
        if audience and audience not in settings.audiences:
            raise ConfigError(
                f"{where('token_file')}: audience {audience!r} is not kept "
                f"fresh; add it with {where('audience')}"
            )
    check_renders(settings)
    if settings.socket_mode & 0o111:
        raise ConfigError(
            f"{where('socket_mode')}: {oct(settings.socket_mode)} "
            "sets execute bits, which mean nothing on a socket; use e.g. 0600 or 0660"
        )


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from a ``tokenrelay run`` command line (used by tests and the CLI)."""
    parser = argparse.ArgumentParser(prog="tokenrelay run")
    add_arguments(parser)
    return load(parser.parse_args(list(argv)), environ)
