"""The tables of docs/kubernetes.md that ``python -m tokenrelay.docgen`` writes: the annotations, and
the flags of ``tokenrelay inject`` and ``tokenrelay webhook``, each from the table the code reads."""

from __future__ import annotations

from collections.abc import Sequence

from .._version import __version__
from ..options import Option
from . import inject, options, settings


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def annotation_table() -> list[str]:
    """The annotation table: one row per row of ``options.TABLE``, then the injector's own status."""
    lines = ["| Annotation | Default | What |", "|---|---|---|"]
    for row in options.TABLE:
        lines.append(f"| `{row.name}` | {_cell(row.default_cell())} | {_cell(row.what_cell())} |")
    lines.append(f"| `{options.STATUS}` | (set by the injector) | {_cell(options.STATUS_HELP)} |")
    return lines


def _default(option: Option) -> str:
    if option.required:
        return "(required)"
    if option.default is None:
        return "unset"
    if option.default == ():
        return "none"
    if isinstance(option.default, float):
        return f"`{option.default:g}`"
    # the image's tag is the release: the page says so rather than go stale at every release
    return f"`{str(option.default).replace(__version__, '<version>')}`"


def _flags(options: Sequence[Option]) -> list[str]:
    lines = ["| Flag | Env | Default | What |", "|---|---|---|---|"]
    for option in options:
        spelled = [f"`{flag}`" for flag in option.flags]
        if option.metavar:
            spelled[-1] = f"`{option.flag} {option.metavar}`"
        env = f"`{option.env}`" if option.variable is not None else ""
        lines.append(f"| {', '.join(spelled)} | {env} | {_cell(_default(option))} | {_cell(option.help)} |")
    return lines


def injector_flags() -> list[str]:
    """The flags ``tokenrelay inject`` and ``tokenrelay webhook`` share: what every sidecar gets."""
    return _flags(settings.OPTIONS)


def inject_flags() -> list[str]:
    return _flags(inject.OPTIONS)


def webhook_flags() -> list[str]:
    from . import webhook  # aiohttp and cryptography: only for the webhook's own table

    return _flags(webhook.OPTIONS)
