"""--render: fresh credentials in the files other tools read (``.netrc``, ``.npmrc``, Maven's
``settings.xml``, a docker ``config.json``, a template of the user's), kept correct at every refresh
without touching anything else in them.

``format`` is the interface, one module per format, ``table`` their registration and the
``FORMAT=PATH`` reader, ``sink`` the Observer the daemon wires (``from_settings``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..helpers.hosts import join_netloc, split_hostport
from .format import Entry, Format, FormatError, Options
from .sink import RenderSink, Report
from .table import FORMATS, Render, parse

if TYPE_CHECKING:
    from ..config import Settings

__all__ = [
    "FORMATS",
    "Entry",
    "Format",
    "FormatError",
    "Options",
    "Render",
    "RenderSink",
    "Report",
    "from_settings",
    "parse",
]


def options(maven_ids: Sequence[str]) -> Options:
    """The formats' options from --render-maven-ids (``HOST=ID`` each; checked by config)."""
    ids = {}
    for spec in maven_ids:
        host, _, server_id = spec.partition("=")
        parts = split_hostport(host.strip())
        if parts is not None:
            ids[join_netloc(*parts)] = server_id.strip()
    return Options(maven_ids=ids)


def from_settings(settings: Settings, report: Report | None = None) -> list[RenderSink]:
    """A sink per --render of ``settings`` (checked by config: they parse)."""
    from ..helpers.hosts import parse_list

    hosts = parse_list(settings.hosts, "--hosts")
    formats = options(settings.render_maven_ids)
    return [
        RenderSink(parse(spec, formats), hosts, settings.render_mode, *([report] if report else []))
        for spec in settings.render
    ]
