"""The options machine every command uses: the ``Option`` row, its converters, and the reader of flags,
environment and TOML (as pip's ``cmdoptions.py`` serves all of pip).

Each command keeps its own table of rows beside its code (``sidecar.settings`` for ``tokenrelay run``,
``agent.options``, ``exec.options``, ``kube.settings``, ``kube.webhook``, ``kube.inject``); a row is a
flag ``--name``, by default an environment variable ``TOKENRELAY_NAME``, and, for a command that reads a
``--config`` file, a key ``name`` (or ``name`` with dashes) in it; precedence is flag > env > file >
default. ``add_options`` puts a table on an argparse parser, ``read`` and ``read_options`` read it back,
and ``tokenrelay.docgen`` writes its docs table.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ConfigError
from .lite import rules
from .lite.names import ENV_PREFIX
from .lite.names import env as env_name
from .lite.names import flag as flag_name
from .lite.netloc import parse_hostport
from .lite.regularfile import NotRegularFile, read_regular

Kind = Literal[
    "str",
    "url",
    "path",
    "mode",
    "choice",
    "bool",
    "seconds",
    "delay",
    "int",
    "list",
    "uids",
    "hostport",
    "render",
]
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Option:
    """One setting of a command: its flag, environment variable, TOML key, kind, default and help."""

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
    # A family's own reading of the raw value (e.g. render's FORMAT=PATH specs and [[render]] tables),
    # in place of the kind's converter; ValueError or TypeError when it is malformed.
    convert: Callable[[Any], Any] | None = field(default=None, compare=False)

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


# The logging rows every long-running command shares: run reads them from TOKENRELAY_LOG_*, the others
# as flags alone (``logging_option``).
LOG_OPTIONS: tuple[Option, ...] = (
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
LOGGING = ("log_level", "log_format")  # in the order the other commands list them


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
    (option,) = (option for option in LOG_OPTIONS if option.name == name)
    return dataclasses.replace(option, variable=None)


def read(
    options: Sequence[Option],
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    file_values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The options given (flag > env > TOML file), converted; ConfigError naming the flag and the
    variable when one is malformed, or required and not given. Those not given are left out."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for option in options:
        raw, origin = _pick(option, args, env, file_values or {})
        if raw is None:
            if option.required:
                raise ConfigError(f"{option.where()} is required: {option.help}")
            continue
        values[option.name] = _convert(option, raw, origin)
    return values


def read_options(
    options: Sequence[Option], args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Every option of a table read by ``read``, those not given at their default."""
    given = read(options, args, environ)
    return {option.name: given.get(option.name, option.default) for option in options}


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


def read_toml(path: str, options: Sequence[Option], foreign: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The keys of the TOML file at ``path`` (``--config``), each an option of ``options`` (dashes or
    underscores) or a ``foreign`` key another command reads; ConfigError naming --config otherwise."""
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
    names = {option.name for option in options}
    values = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name in foreign:
            continue
        if name not in names:
            known = ", ".join(sorted(names))
            raise ConfigError(f"--config file {path}: unknown key {key!r}; known keys: {known}")
        values[name] = value
    return values


def _convert(option: Option, raw: Any, origin: str) -> Any:
    try:
        return option.convert(raw) if option.convert else _CONVERTERS[option.kind](option, raw)
    except (ValueError, TypeError) as exc:
        # a flag alone can only have come from the flag: no need to say so
        source = "" if option.variable is None else f" (from {origin})"
        raise ConfigError(f"{option.where()}: {exc}{source}") from None


def as_list(raw: Any) -> list[str]:
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


def choose(text: str, choices: Sequence[str]) -> str:
    """``text``, in any case, as one of ``choices``; ValueError saying which it may be. (Shared with
    the pods' annotations, ``kube.options``.)"""
    if text.lower() not in choices:
        raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
    return text.lower()


def split_list(raw: Any) -> tuple[str, ...]:
    """A list setting: strings, each of them comma-separated, stripped, once each in their order.
    (Shared with the pods' annotations, ``kube.options``.)"""
    return tuple(dict.fromkeys(as_list(raw)))


def _to_choice(option: Option, raw: Any) -> str:
    return choose(_to_str(option, raw), option.choices)


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
    return split_list(raw)


def _to_delay(option: Option, raw: Any) -> float:
    # 0 is allowed: a pause that may be skipped (the webhook's tests stop at once with --shutdown-delay 0)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value < rules.MAX_SECONDS:
        raise ValueError(f"{raw!r} is not a number of seconds (0 or more, under a day)")
    return value


def _to_uids(option: Option, raw: Any) -> tuple[int, ...]:
    if isinstance(raw, int):
        raw = str(raw)
    elif isinstance(raw, list):
        raw = [str(item) for item in raw]
    items = as_list(raw)
    ids = []
    for item in items:
        if not item.isdigit():
            raise ValueError(f"{item!r} is not a numeric id")
        ids.append(int(item))
    return tuple(ids)


def _to_hostport(option: Option, raw: Any) -> tuple[str, int]:
    example = option.default if isinstance(option.default, str) else "127.0.0.1:8080"
    return parse_hostport(_to_str(option, raw), example)


_CONVERTERS: dict[Kind, Callable[[Option, Any], Any]] = {
    "str": _to_str,
    "url": _to_url,
    "path": _to_str,
    "mode": _to_mode,
    "choice": _to_choice,
    "bool": _to_bool,
    "seconds": _to_seconds,
    "delay": _to_delay,
    "int": _to_int,
    "list": _to_list,
    "uids": _to_uids,
    "hostport": _to_hostport,
}
