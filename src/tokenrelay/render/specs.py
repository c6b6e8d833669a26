"""The --render options read as the render family reads them: ``FORMAT=PATH`` specs (and TOML's
``[[render]]`` tables), the formats' own options, and the checks that involve --hosts.

Standard library only at import, with the formats read when a check runs: ``tokenrelay run``'s
settings (and so every command's parser) import this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError
from ..lite.names import where
from ..options import as_list

if TYPE_CHECKING:
    from .format import Options


class RenderSettings(Protocol):
    """What the render family reads of ``tokenrelay run``'s settings."""

    @property
    def hosts(self) -> tuple[str, ...]: ...
    @property
    def render(self) -> tuple[str, ...]: ...
    @property
    def render_mode(self) -> int: ...
    @property
    def render_maven_ids(self) -> tuple[str, ...]: ...


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


def options(maven_ids: Sequence[str]) -> Options:
    """The formats' options from --render-maven-ids (``HOST=ID`` each; checked by ``check_settings``)."""
    from ..helpers.hosts import join_netloc, split_hostport
    from .format import Options

    ids = {}
    for spec in maven_ids:
        host, _, server_id = spec.partition("=")
        parts = split_hostport(host.strip())
        if parts is not None:
            ids[join_netloc(*parts)] = server_id.strip()
    return Options(maven_ids=ids)


def check_settings(settings: RenderSettings) -> None:
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
    from .table import parse

    for spec in settings.render:
        try:
            parse(spec, options(settings.render_maven_ids)).format.check(hosts)
        except ValueError as exc:
            raise ConfigError(f"{where('render')}: {exc}") from None
