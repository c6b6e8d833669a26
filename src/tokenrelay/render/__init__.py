"""--render: fresh credentials in the files other tools read (``.netrc``, ``.npmrc``, Maven's
``settings.xml``, a docker ``config.json``, a template of the user's), kept correct at every refresh
without touching anything else in them.

``format`` is the interface, one module per format, ``table`` their registration and the
``FORMAT=PATH`` reader, ``specs`` the --render options as ``tokenrelay run``'s settings read and
check them, ``sink`` the Observer the daemon wires (``from_settings``).
"""

from __future__ import annotations

from .format import Entry, Format, FormatError, Options
from .sink import RenderSink, Report
from .specs import RenderSettings, options
from .table import FORMATS, Render, parse

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
    "options",
    "parse",
]


def from_settings(settings: RenderSettings, report: Report | None = None) -> list[RenderSink]:
    """A sink per --render of ``settings`` (checked by ``specs.check_settings``: they parse)."""
    from ..helpers.hosts import parse_list

    hosts = parse_list(settings.hosts, "--hosts")
    formats = options(settings.render_maven_ids)
    return [
        RenderSink(parse(spec, formats), hosts, settings.render_mode, *([report] if report else []))
        for spec in settings.render
    ]
