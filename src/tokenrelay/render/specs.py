"""The --render options, declared by the render family: ``--render`` (``FORMAT=PATH`` specs, or TOML's
``[[render]]`` tables), ``--render-mode``, and each format's own rows (``Format.options``), which
``tokenrelay run``'s table takes in (``options_rows``); then the checks that involve --hosts.

Cheap at import (the formats and the hosts parser; the sink, and aiohttp, only when named): run's
settings, and so every command's parser, import this module.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import ConfigError
from ..lite.names import DEFAULT_MODE, where
from ..options import Option, as_list
from .format import Options
from .table import FORMATS, parse


class RenderSettings(Protocol):
    """What the render family reads of ``tokenrelay run``'s settings (and, by name, its formats' rows)."""

    @property
    def hosts(self) -> tuple[str, ...]: ...
    @property
    def render(self) -> tuple[str, ...]: ...
    @property
    def render_mode(self) -> int: ...


def render_specs(raw: Any) -> tuple[str, ...]:
    """``FORMAT=PATH`` strings; TOML's ``[[render]]`` tables (``format``, ``path``, and ``source``
    for a template) come as the same strings. Checked against the formats in ``check_settings``."""
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
            specs.extend(as_list(item))  # env: comma-separated
    return tuple(dict.fromkeys(specs))


def format_options() -> tuple[Option, ...]:
    """Every format's own rows, in the order of the formats' table."""
    return tuple(row for cls in FORMATS.values() for row in cls.options)


def options_rows() -> tuple[Option, ...]:
    """The family's rows for ``tokenrelay run``'s table: --render, --render-mode, each format's own."""
    return (*_OPTIONS, *format_options())


_OPTIONS: tuple[Option, ...] = (
    Option(
        "render",
        "Keep FORMAT=PATH correct at every refresh for the --hosts (repeatable; TOML [[render]] with "
        "format and path): netrc, npmrc, maven, docker-config, template:SRC. Only tokenrelay's "
        "entries change; a clean stop removes them.",
        kind="render",
        repeatable=True,
        convert=render_specs,
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
)


def options(settings: object) -> Options:
    """The values of the formats' own options in ``settings``, by name, for ``Format.build``."""
    return {row.name: getattr(settings, row.name, row.default) for row in format_options()}


def check_settings(settings: RenderSettings) -> None:
    """--render needs --hosts (whose audiences it keeps fresh), in formats that can hold them. The
    hosts are read only then: without a render they are the credential helpers' business."""
    from ..errors import HostsError
    from ..helpers.hosts import parse_list

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
    for spec in settings.render:
        try:
            parse(spec, options(settings)).format.check(hosts)
        except ValueError as exc:
            raise ConfigError(f"{where('render')}: {exc}") from None
