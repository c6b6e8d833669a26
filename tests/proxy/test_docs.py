"""docs/proxy.md stays true to the proxy's bounds."""

from __future__ import annotations

import dataclasses
import re

from tokenrelay.proxy import Limits

from ..support.production import REPO

DOC = REPO / "docs" / "proxy.md"


def shown(name: str, value: float) -> str:
    """A default as the docs write it: sizes in KiB or MiB, times in s."""
    if name.endswith(("_bytes", "_window")):
        for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
            if value >= size and value % size == 0:
                return f"{value // size:g} {unit}"
        return f"{value} bytes"
    if name.endswith("_timeout"):
        return f"{value:g} s"
    if name.endswith("_rate"):
        return f"{value} bytes/s"
    return str(value)


def documented() -> dict[str, str]:
    """The limits table's rows: field name to the default it states."""
    text = DOC.read_text()
    section = text[text.index("## Limits\n") :]
    section = section[: section.index("\n## ")]
    return dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, re.MULTILINE))


def test_the_limits_table_states_every_bound_and_its_default() -> None:
    """Every Limits field has a row in docs/proxy.md's limits table, with the default the code has."""
    defaults = Limits()
    code = {f.name: shown(f.name, getattr(defaults, f.name)) for f in dataclasses.fields(Limits)}
    assert documented() == code


def test_every_bound_the_page_names_has_its_default() -> None:
    """Wherever docs/proxy.md gives a value with its Limits field, "100 (`h2_max_streams`)", the value
    is that field's default."""
    defaults = Limits()
    fields = {f.name for f in dataclasses.fields(Limits)}
    named = re.findall(r"(\d+(?: [KM]iB| s)?)(?:,| \() ?`?(\w+)`\)", DOC.read_text())
    named = [(value, field) for value, field in named if field in fields]
    assert len(named) >= 9
    assert named == [(shown(field, getattr(defaults, field)), field) for _, field in named]
