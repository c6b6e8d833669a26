"""The proxy package's modules depend on each other one way only."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import tokenrelay.proxy

PACKAGE = Path(tokenrelay.proxy.__file__).parent


def imports_within_the_package(path: Path) -> set[str]:
    """The package's modules that ``path`` imports, TYPE_CHECKING blocks and function bodies included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found & {p.stem for p in PACKAGE.glob("*.py")}


def test_no_import_cycle_in_the_proxy_package() -> None:
    """No module of tokenrelay.proxy imports, even for typing only, one that imports it back."""
    graph = {path.stem: imports_within_the_package(path) for path in PACKAGE.glob("*.py")}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
    assert order.index("upstream") < order.index("pool") < order.index("downstream") < order.index("server")
