"""The options machine sits on the floor, each command's table above it, and the docs generator on top."""

from __future__ import annotations

import ast
from pathlib import Path

import tokenrelay

PACKAGE = Path(tokenrelay.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """Every tokenrelay module ``path`` imports, at its top, in a function or for the type checker."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("tokenrelay")}


def _modules() -> dict[str, set[str]]:
    return {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts): _imports(path)
        for path in PACKAGE.rglob("*.py")
    }


def test_the_options_machine_imports_only_the_floor() -> None:
    """tokenrelay.options (Option, converters, reader) imports only the error tree and lite."""
    imported = _imports(PACKAGE / "options.py")
    assert {
        name for name in imported if not name.startswith(("tokenrelay.errors", "tokenrelay.lite"))
    } == set()


def test_render_reads_runs_settings_through_its_own_protocol() -> None:
    """No render module imports tokenrelay run's settings: the config <-> render circle stays broken."""
    importers = {
        module
        for module, imported in _modules().items()
        if module.startswith("tokenrelay.render")
        and any(name.startswith(("tokenrelay.sidecar.settings", "tokenrelay.config")) for name in imported)
    }
    assert importers == set()


def test_the_docs_generator_is_the_top_layer() -> None:
    """The generator of the docs tables (which reads kube, exec and agent) is a top-level module, and
    no package below imports it."""
    modules = _modules()
    generators = {module for module in modules if module.endswith(".docgen")}
    assert generators == {"tokenrelay.docgen"}
    importers = {
        module
        for module, imported in modules.items()
        if any(name.endswith(".docgen") for name in imported) and module.count(".") > 1
    }
    assert importers == set()
