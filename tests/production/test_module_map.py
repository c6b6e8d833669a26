"""The README's map of modules names every module of the package, so it cannot fall behind the code."""

from __future__ import annotations

from pathlib import Path

import tokenrelay

PACKAGE = Path(tokenrelay.__file__).resolve().parent
README = PACKAGE.parents[1] / "README.md"


def test_the_readme_map_names_every_module() -> None:
    """Every .py module under src/tokenrelay (generated protobuf code aside) appears in the README's map."""
    text = README.read_text()
    section = text[text.index("## Development") :]
    missing = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.name.endswith("_pb2.py") and f"`{path.stem}`" not in section
    ]
    assert missing == [], f"add these to the README's module map: {missing}"
