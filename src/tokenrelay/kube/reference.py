"""The tables of docs/kubernetes.md that ``python -m tokenrelay.docgen`` writes: the annotations, and
the flags of ``tokenrelay inject`` and ``tokenrelay webhook``, each from the table the code reads."""

from __future__ import annotations

from . import options


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def annotation_table() -> list[str]:
    """The annotation table: one row per row of ``options.TABLE``, then the injector's own status."""
    lines = ["| Annotation | Default | What |", "|---|---|---|"]
    for row in options.TABLE:
        lines.append(f"| `{row.name}` | {_cell(row.default_cell())} | {_cell(row.help)} |")
    lines.append(f"| `{options.STATUS}` | (set by the injector) | {_cell(options.STATUS_HELP)} |")
    return lines
