"""The emulator's rooms depend on each other one way only: no import circle, and no room imports one
above it (the rooms import the shared model and errors, never the app or the cli)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import tokenrelay.emulator

PACKAGE = Path(tokenrelay.emulator.__file__).parent

# What each room may import besides its own modules. A module's room is its folder; the
# emulator's own files are placed in TOP_LEVEL.
ROOMS: dict[str, frozenset[str]] = {
    "floor": frozenset(),  # the shared model, errors, inputs: below every room
    "iam": frozenset({"floor"}),  # the kinds, their store and rules
    "sts": frozenset({"floor", "iam"}),  # keys live in the store; an exchange looks up the identity
    "platforms": frozenset({"floor", "sts"}),  # minted by the platform issuer, verified as sts verifies
    "api": frozenset({"floor", "iam", "sts"}),  # the kinds' HTTP face; the bearer is an sts token
    "grpcapi": frozenset({"floor"}),  # handed the HTTP face at run time, by the app
    "registry": frozenset({"floor", "iam", "sts", "api"}),
}
ROOMS["top"] = frozenset(ROOMS)  # the app and the commands compose every room
TOP_LEVEL = {
    "model": "floor",
    "errors": "floor",
    "inputs": "floor",
    "malformed": "floor",
    "address": "floor",
    "api": "api",
    "pagination": "api",
    "pagetoken": "api",
    "": "top",  # the package's face, which hands on the app's names
    "app": "top",
    "cli": "top",
    "dev": "top",
    "seed": "top",
    "commandpaths": "top",
}


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = {_name(path): path for path in PACKAGE.rglob("*.py")}
MODULES = set(FILES)


def room_of(name: str) -> str | None:
    if name in TOP_LEVEL:
        return TOP_LEVEL[name]
    folder = name.partition(".")[0]
    return folder if folder in ROOMS else None


def imports_within_the_package(name: str) -> set[str]:
    """The emulator's modules that ``name`` imports, TYPE_CHECKING blocks and function bodies included:
    ``from . import x`` imports the module ``x``; ``from .x import y`` the module ``x.y`` when there is
    one, else ``x``."""
    path = FILES[name]
    package = name.split(".") if path.name == "__init__.py" and name else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        up = node.level - 1
        if up > len(package):
            continue  # beyond tokenrelay.emulator
        base = [*package[: len(package) - up], *(node.module.split(".") if node.module else [])]
        for alias in node.names:
            module = ".".join([*base, alias.name])
            found.add(module if module in MODULES else ".".join(base))
    return (found & MODULES) - {name}


GRAPH = {name: imports_within_the_package(name) for name in MODULES}


def test_every_module_has_a_room() -> None:
    """Each module of the emulator is in a room of ROOMS (a new top-level module is placed in TOP_LEVEL)."""
    assert sorted(name for name in MODULES if room_of(name) is None) == []


def test_no_import_circle_in_the_emulator() -> None:
    """No module of tokenrelay.emulator imports, even for typing only or in a function, one that imports
    it back."""
    try:
        order = list(TopologicalSorter(GRAPH).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None
    assert order.index("model") < order.index("iam.kinds") < order.index("iam.store") < order.index("app")


def test_no_room_imports_a_room_above_it() -> None:
    """Each import that leaves a room goes to a room it may import (ROOMS): the rooms import the shared
    model and errors, never the app, the cli or a room above them."""
    upward = sorted(
        f"{name} ({room_of(name)}) -> {target} ({room_of(target)})"
        for name, targets in GRAPH.items()
        for target in targets
        if room_of(name) != room_of(target)
        and room_of(target) not in ROOMS.get(room_of(name) or "", frozenset())
    )
    assert upward == []
