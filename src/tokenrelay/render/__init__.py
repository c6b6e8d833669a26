"""--render: fresh credentials in the files other tools read (``.netrc``, ``.npmrc``, Maven's
``settings.xml``, a docker ``config.json``, a template of the user's), kept correct at every refresh
without touching anything else in them.

``format`` is the interface, one module per format, ``table`` their registration and the
``FORMAT=PATH`` reader, ``specs`` the --render options as ``tokenrelay run``'s settings read and
check them, ``sink`` the Observer the daemon wires (``from_settings``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .format import Entry, Format, FormatError, Options
from .specs import RenderSettings, options
from .table import FORMATS, Render, parse

if TYPE_CHECKING:
    from .sink import RenderSink, Report

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


def __getattr__(name: str) -> Any:
    # The sink (and aiohttp with it) loads when first named: run's settings read this package's
    # options, and every command's parser reads those.
    if name in ("RenderSink", "Report"):
        from . import sink

        return getattr(sink, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def from_settings(settings: RenderSettings, report: Report | None = None) -> list[RenderSink]:
    """A sink per --render of ``settings`` (checked by ``specs.check_settings``: they parse)."""
    from ..helpers.hosts import parse_list
    from .sink import RenderSink

    hosts = parse_list(settings.hosts, "--hosts")
    formats = options(settings)
    return [
        RenderSink(parse(spec, formats), hosts, settings.render_mode, *([report] if report else []))
        for spec in settings.render
    ]
