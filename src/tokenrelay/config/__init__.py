"""Settings for ``tokenrelay run``: one table of options, read from flags, environment and TOML.

Every option is a flag ``--name``, an environment variable ``TOKENRELAY_NAME`` and a key ``name`` (or
``name`` with dashes) in the TOML file given by ``--config``; precedence is flag > env > file > default.
The table below is the single source: argparse, the environment, the file and the configuration
reference in docs/operations.md are all derived from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError
from ..lite import rules
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
from ..lite.names import env as env_name
from ..lite.names import flag as flag_name
from ..lite.netloc import is_loopback, parse_hostport
from ..lite.regularfile import NotRegularFile, read_regular
from ..tokens.idsources.registry import SOURCES

Kind = Literal[
    "str", "url", "path", "mode", "choice", "bool", "seconds", "int", "list", "uids", "hostport", "render"
]
ID_TOKEN_SOURCES = tuple(SOURCES)
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")
# Keys a shared TOML file may hold for other tokenrelay commands.
FOREIGN_KEYS: frozenset[str] = frozenset()
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Option:
    """One setting of ``tokenrelay run`` (or, in their own tables, of ``inject`` and ``webhook``)."""

    name: str  # snake_case; the flag is --name-with-dashes
    help: str
    kind: Kind = "str"
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    repeatable: bool = False  # flag may repeat; env is comma-separated; TOML takes a list
    # Its environment variable: "" for TOKENRELAY_NAME (every option of run), None for a flag alone,
    # else that name (the webhook's --namespace reads POD_NAMESPACE, the downward API's usual name).
    variable: str | None = ""
    short: str | None = None  # a one-letter flag beside the long one, e.g. -f

    @property
    def flag(self) -> str:
        return flag_name(self.name)

    @property
    def env(self) -> str:
        assert self.variable is not None, f"{self.flag} has no environment variable"
        return self.variable or env_name(self.name)

    @property
    def flags(self) -> tuple[str, ...]:
        return (self.short, self.flag) if self.short else (self.flag,)

    def where(self) -> str:
        """How a user sets it, for error messages: ``--name (env TOKENRELAY_NAME)``."""
        return self.flag if self.variable is None else f"{self.flag} (env {self.env})"


OPTIONS: tuple[Option, ...] = (
    # the exchange
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
    # the platform's OIDC token
    Option(
        "id_token_source",
        "Where the platform's OIDC token comes from (docs/platforms/); auto detects it.",
        kind="choice",
        choices=ID_TOKEN_SOURCES,
        metavar="SOURCE",
    ),
    Option(
        "id_token_file",
        "File holding the platform's OIDC token; re-read at every exchange.",
        kind="path",
        default=DEFAULT_ID_TOKEN_FILE,
        metavar="PATH",
    ),
    Option("id_token_env", "Environment variable holding the platform's OIDC token.", metavar="VAR"),
    Option(
        "id_token_audience",
        "Audience to request of a source that mints the OIDC token at every exchange (GitHub Actions, "
        "Buildkite, CircleCI's CLI, GCP, Azure, AWS, SPIFFE; default: the --auth-url).",
        metavar="AUD",
    ),
    Option(
        "azure_service_connection_id",
        "Azure Pipelines service connection to request the OIDC token for "
        "(default: AZURESUBSCRIPTION_SERVICE_CONNECTION_ID).",
        metavar="ID",
    ),
    # the local API
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
    # the proxy
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
    Option(
        "proxy_timeout",
        "How long the proxy waits for the upstream's answer, in seconds (then 504).",
        kind="seconds",
        default=DEFAULT_PROXY_TIMEOUT,
        metavar="SECONDS",
    ),
    Option(
        "proxy_max_connections",
        "Most client connections the proxy holds open at once.",
        kind="int",
        default=DEFAULT_PROXY_MAX_CONNECTIONS,
        metavar="N",
    ),
    # production
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
    Option(
        "render",
        "Keep FORMAT=PATH correct at every refresh for the --hosts (repeatable; TOML [[render]] with "
        "format and path): netrc, npmrc, maven, docker-config, template:SRC. Only tokenrelay's "
        "entries change; a clean stop removes them.",
        kind="render",
        repeatable=True,
        default=(),
        metavar="FORMAT=PATH",
    ),
    Option(
        "render_mode",
        "Permission bits of --render files, octal.",
        kind="mode",
        default=DEFAULT_MODE,
        metavar="MODE",
    ),
    Option(
        "render_maven_ids",
        "The <id> of a host's <server> in a maven --render (repeatable); the host[:port] otherwise.",
        kind="list",
        repeatable=True,
        default=(),
        metavar="HOST=ID",
    ),
    Option(
        "once",
        "Exchange once (retrying a token-service outage within --wait-timeout), write the "
        "--token-file sinks, and exit.",
        kind="bool",
        default=False,
    ),
    # logging
    Option(
        "log_format", "Log line format.", kind="choice", choices=LOG_FORMATS, default="json", metavar="FORMAT"
    ),
    Option(
        "log_level",
        "Lowest level logged.",
        kind="choice",
        choices=LOG_LEVELS,
        default="info",
        metavar="LEVEL",
    ),
)
OPTIONS_BY_NAME = {option.name: option for option in OPTIONS}
LOGGING = ("log_level", "log_format")  # what every long-running command shares with run


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
    add_options(parser, OPTIONS)


def add_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, options: Sequence[Option]) -> None:
    """Add a flag per option. An option with a variable defaults to None, so that "not given" can
    fall back to the environment; a flag alone defaults to its option's default."""
    for option in options:
        help_text = option.help
        if option.default not in (None, (), False):
            shown = oct(option.default) if option.kind == "mode" else option.default
            help_text += f" Default: {shown}."
        if option.variable is not None:
            help_text += f" [env {option.env}]"
        default = None if option.variable is not None else option.default
        if option.kind == "bool":
            parser.add_argument(
                *option.flags,
                dest=option.name,
                action="store_const",
                const=True,
                default=default,
                help=help_text,
            )
        elif option.repeatable:
            parser.add_argument(
                *option.flags,
                dest=option.name,
                action="append",
                default=None if default is None else list(default),
                metavar=option.metavar,
                help=help_text,
            )
        else:
            parser.add_argument(
                *option.flags,
                dest=option.name,
                default=default,
                metavar=option.metavar,
                # a flag alone is checked by argparse; the others by _to_choice, whatever their origin
                choices=(option.choices or None) if option.variable is None else None,
                help=help_text,
            )


def add_logging_options(parser: argparse.ArgumentParser, names: Sequence[str] = LOGGING) -> None:
    """``--log-level`` (and ``--log-format``) as flags alone, for the commands other than ``run``."""
    add_options(parser, [logging_option(name) for name in names])


def logging_option(name: str) -> Option:
    """The option ``name`` of ``LOGGING`` as a flag alone: the other commands read no variable."""
    return dataclasses.replace(OPTIONS_BY_NAME[name], variable=None)


def load(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Merge flags, environment and the TOML file into validated Settings; raises ConfigError."""
    env = os.environ if environ is None else environ
    config_path = getattr(args, "config", None) or env.get(ENV_PREFIX + "CONFIG")
    file_values = _read_toml(config_path) if config_path else {}
    values: dict[str, Any] = {}
    for option in OPTIONS:
        raw, origin = _pick(option, args, env, file_values)
        if raw is None:
            if option.required:
                raise ConfigError(f"{option.where()} is required: {option.help}")
            continue
        values[option.name] = _convert(option, raw, origin)
    # --id-token-env alone is enough to choose the env source
    values.setdefault("id_token_source", "env" if values.get("id_token_env") else "file")
    settings = Settings(**values, config=config_path)
    _check(settings)
    return settings


def read_options(
    options: Sequence[Option], args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The values of a table of options other than run's (flag > env > the option's default),
    converted and checked as run's are; raises ConfigError."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for option in options:
        raw, origin = _pick(option, args, env, {})
        values[option.name] = option.default if raw is None else _convert(option, raw, origin)
    return values


def _pick(
    option: Option, args: argparse.Namespace, env: Mapping[str, str], file_values: Mapping[str, Any]
) -> tuple[Any, str]:
    flag_value = getattr(args, option.name, None)
    if flag_value is not None:
        return flag_value, option.flag
    env_value = env.get(option.env) if option.variable is not None else None
    if env_value is not None and env_value != "":
        return env_value, option.env
    if option.name in file_values:
        return file_values[option.name], f"key {option.name!r} in the --config file"
    return None, ""


def _read_toml(path: str) -> dict[str, Any]:
    # Read without blocking: SIGHUP re-reads the file on the event loop (see regularfile).
    import tomllib  # only with --config: idle memory is the sidecar's budget

    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"--config (env {ENV_PREFIX}CONFIG): {path} is over 1 MiB: not a config file")
        data = tomllib.loads(raw.decode())
    except FileNotFoundError:
        raise ConfigError(f"--config (env {ENV_PREFIX}CONFIG): no file at {path}") from None
    except NotRegularFile as exc:
        raise ConfigError(
            f"--config (env {ENV_PREFIX}CONFIG): {path} is {exc.kind}, not a regular file; "
            "point it at the TOML file"
        ) from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        # tomllib decodes the bytes itself: a file that is not UTF-8 raises UnicodeDecodeError
        raise ConfigError(f"--config (env {ENV_PREFIX}CONFIG): cannot read {path}: {exc}") from None
    values = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name in FOREIGN_KEYS:
            continue
        if name not in OPTIONS_BY_NAME:
            known = ", ".join(sorted(OPTIONS_BY_NAME))
            raise ConfigError(f"--config file {path}: unknown key {key!r}; known keys: {known}")
        values[name] = value
    return values


def _convert(option: Option, raw: Any, origin: str) -> Any:
    converter = _CONVERTERS[option.kind]
    try:
        return converter(option, raw)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{option.where()}: {exc} (from {origin})") from None


def _as_list(raw: Any) -> list[str]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list | tuple):
        raise TypeError(f"expected a list of strings, got {type(raw).__name__}")
    items: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            raise TypeError(f"expected strings, got {item!r}")
        # env values and TOML strings may carry several comma-separated entries
        items.extend(part.strip() for part in item.split(",") if part.strip())
    return items


def _to_str(option: Option, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("expected a non-empty string")
    return raw.strip()


def _to_url(option: Option, raw: Any) -> str:
    return rules.http_url(_to_str(option, raw))


def _to_mode(option: Option, raw: Any) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        mode = raw
    else:
        text = _to_str(option, raw)
        try:
            mode = int(text, 8)
        except ValueError:
            raise ValueError(f"{text!r} is not an octal mode such as 0600") from None
    if not 0 <= mode <= 0o777:
        raise ValueError(f"{oct(mode)} is not a permission mode between 0000 and 0777")
    return mode


def _to_choice(option: Option, raw: Any) -> str:
    text = _to_str(option, raw).lower()
    if text not in option.choices:
        raise ValueError(f"{text!r} is not one of {', '.join(option.choices)}")
    return text


def _to_bool(option: Option, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw!r} is not a boolean (true/false)")


def _to_seconds(option: Option, raw: Any) -> float:
    return rules.seconds(raw)


def _to_int(option: Option, raw: Any) -> int:
    # TOML true and 2.7 would pass int() as 1 and 2: take only integers and their decimal spelling.
    if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
        raise ValueError(f"{raw!r} is not a whole number")
    try:
        value = int(raw)
    except (TypeError, ValueError, OverflowError):  # OverflowError: TOML's inf
        raise ValueError(f"{raw!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{raw!r} must be at least 1")
    return value


def _to_list(option: Option, raw: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_as_list(raw)))


def _to_render(option: Option, raw: Any) -> tuple[str, ...]:
    """``FORMAT=PATH`` strings; TOML's ``[[render]]`` tables (``format``, ``path``, and ``source``
    for a template) come as the same strings. Checked against the formats in ``_check``."""
    items = raw if isinstance(raw, list) else [raw]
    specs = []
    for item in items:
        if isinstance(item, dict):
            unknown = set(item) - {"format", "path", "source"}
            if unknown or not isinstance(item.get("format"), str) or not isinstance(item.get("path"), str):
                raise ValueError(
                    "each [[render]] table takes format and path (and source, for a template), as strings"
                )
            kind = item["format"] + (f":{item['source']}" if "source" in item else "")
            specs.append(f"{kind}={item['path']}")
        else:
            specs.extend(_as_list(item))  # env: comma-separated
    return tuple(dict.fromkeys(specs))


def _to_uids(option: Option, raw: Any) -> tuple[int, ...]:
    if isinstance(raw, int):
        raw = str(raw)
    elif isinstance(raw, list):
        raw = [str(item) for item in raw]
    items = _as_list(raw)
    ids = []
    for item in items:
        if not item.isdigit():
            raise ValueError(f"{item!r} is not a numeric id")
        ids.append(int(item))
    return tuple(ids)


def _to_hostport(option: Option, raw: Any) -> tuple[str, int]:
    return parse_hostport(_to_str(option, raw))


_CONVERTERS: dict[Kind, Callable[[Option, Any], Any]] = {
    "str": _to_str,
    "url": _to_url,
    "path": _to_str,
    "mode": _to_mode,
    "choice": _to_choice,
    "bool": _to_bool,
    "seconds": _to_seconds,
    "int": _to_int,
    "list": _to_list,
    "uids": _to_uids,
    "hostport": _to_hostport,
    "render": _to_render,
}


def _check(settings: Settings) -> None:
    """Rules that involve more than one option."""
    _check_source(settings)
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
    _check_renders(settings)
    if settings.socket_mode & 0o111:
        raise ConfigError(
            f"{where('socket_mode')}: {oct(settings.socket_mode)} "
            "sets execute bits, which mean nothing on a socket; use e.g. 0600 or 0660"
        )


def _check_renders(settings: Settings) -> None:
    """--render needs --hosts (whose audiences it keeps fresh), in formats that can hold them. The
    hosts are read only then: without a render they are the credential helpers' business."""
    from ..errors import HostsError
    from ..helpers.hosts import parse_list, parse_spec

    for spec in settings.render_maven_ids:
        host_text, sep, server_id = spec.partition("=")
        try:
            parse_spec(host_text)
        except HostsError:
            sep = ""
        if not sep or not server_id.strip():
            raise ConfigError(f"{where('render_maven_ids')}: {spec!r} is not HOST=ID")
    if not settings.render:
        return
    try:
        hosts = parse_list(settings.hosts, where("hosts"))
    except HostsError as exc:  # its message names the flag already
        raise ConfigError(str(exc)) from None
    if not hosts:
        raise ConfigError(
            f"{where('render')} writes the hosts of {where('hosts')}, and none are set: "
            "give them, e.g. --hosts registry.example.com,npm.example.com"
        )
    from .. import render

    for spec in settings.render:
        try:
            render.parse(spec, render.options(settings.render_maven_ids)).format.check(hosts)
        except ValueError as exc:
            raise ConfigError(f"{where('render')}: {exc}") from None


def _check_source(settings: Settings) -> None:
    """The settings the chosen source needs are given, and none that only another source reads."""
    name = settings.id_token_source
    source = SOURCES[name]
    for option in source.required:
        if getattr(settings, option) is None:
            raise ConfigError(
                f"--id-token-source {name} needs {where(option)}: {OPTIONS_BY_NAME[option].help}"
            )
    for option in sorted({option for other in SOURCES.values() for option in other.options}):
        given = getattr(settings, option) is not None and OPTIONS_BY_NAME[option].default is None
        if given and option not in source.options:
            raise ConfigError(f"{where(option)} does not go with --id-token-source {name}; set one of them")


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from a ``tokenrelay run`` command line (used by tests and the CLI)."""
    parser = argparse.ArgumentParser(prog="tokenrelay run")
    add_arguments(parser)
    return load(parser.parse_args(list(argv)), environ)
