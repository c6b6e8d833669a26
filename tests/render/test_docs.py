"""docs/credential-helpers.md says what the code does: the formats, the markers, the placeholders, and
the GOAUTH and Cargo set-ups the real-client tests use."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tokenrelay.render import FORMATS, block
from tokenrelay.render.template import PLACEHOLDERS

from .test_real_clients import CARGO_PROVIDER, GOAUTH

DOC = (Path(__file__).resolve().parents[2] / "docs" / "credential-helpers.md").read_text()


def test_every_format_has_its_row() -> None:
    """Each registered format is in the docs' format table and the tool table, spelled as --render
    takes it."""
    for name, cls in FORMATS.items():
        spelled = f"{name}:SRC" if cls.takes_source else name
        assert f"| `{spelled}` |" in DOC, name
        assert f"render `{spelled}` |" in DOC, name


def test_markers_and_placeholders_are_the_codes() -> None:
    """The block markers and the template's placeholders are quoted exactly."""
    assert f"`{block.BEGIN}`" in DOC and f"`{block.END}`" in DOC
    for placeholder in PLACEHOLDERS:
        assert f"`{placeholder}`" in DOC


def test_goauth_and_cargo_set_ups_are_the_tested_ones() -> None:
    """The GOAUTH line and the Cargo credential-provider are the ones tests/render drives go and
    cargo with."""
    assert f"export GOAUTH='{GOAUTH}'" in DOC
    [cargo] = [
        b for b in re.findall(r"```toml\n(.*?)```", DOC, flags=re.DOTALL) if "credential-provider" in b
    ]
    registry = tomllib.loads(cargo)["registries"]["internal"]
    assert registry["credential-provider"][:-1] == CARGO_PROVIDER
    assert registry["index"].startswith("sparse+https://")
