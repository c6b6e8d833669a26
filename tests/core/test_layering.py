"""The whole package depends one way only: no import circle, and no import from a lower layer into a
higher one (issue 30). tests/proxy/test_layering.py holds the proxy package's own, finer rules."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import tokenrelay

PACKAGE = Path(tokenrelay.__file__).parent
FACE = "__init__"  # tokenrelay/__init__.py: the version and the error tree handed on

# Each top-level package or module of tokenrelay in one layer, lowest first. A unit imports its own
# modules and the units of lower layers, never one of its own layer or above: the products do not
# import each other, and nothing imports a product to get at what they share.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_version", "errors"),
    (FACE, "lite"),  # lite: standard library only, for the credential helpers' millisecond start
    # the TLS roots, the one maker of client sessions, the option machinery every command uses
    ("systemroots", "outbound", "options"),
    ("tokens",),  # the exchange, the providers, the OIDC token sources
    # The credential helpers: a product, but one that must start in milliseconds, so it builds on
    # lite and tokens only; render, run's settings, the doctor and exec read its host table (helpers.hosts).
    ("helpers",),
    ("serving",),  # the kit every long-running command builds on (Vault's agentproxyshared)
    ("render", "proxy"),
    # ``tokenrelay run``: below the products that run it whole (exec beside its command, dev beside
    # the emulator) or build its parts as it does (the doctor's OIDC token source); they import only
    # RUN_ITSELF of it, never the kit.
    ("sidecar",),
    ("agent", "kube", "exec", "doctor", "emulator"),
    # the command, the `python -m` tools (the docs generator, the image's build check), the public
    # test doubles
    ("cli", "docgen", "imagebuild", "testing"),
    ("__main__",),
)
RUN_ITSELF = {"sidecar.command", "sidecar.daemon", "sidecar.oneshot", "sidecar.settings"}

# Imports that still break the rules, each with the reason and the work that removes it. An entry
# that no longer occurs fails test_every_exception_is_still_needed: take it out.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _unit(module: str) -> str:
    return module.split(".")[0] if module else FACE


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The package's modules ``name`` imports, TYPE_CHECKING blocks and function bodies included."""
    path = MODULES[name]
    home = name.split(".") if path.name == "__init__.py" and name else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names if alias.name.startswith("tokenrelay.")]
            found.update(target.removeprefix("tokenrelay.") for target in targets)
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        named = node.module.split(".") if node.module else []
        if node.level:
            parts = home[: len(home) - (node.level - 1)] + named
        elif named[:1] == ["tokenrelay"]:
            parts = named[1:]
        else:
            continue
        module = ".".join(parts)
        for alias in node.names:
            whole = f"{module}.{alias.name}" if module else alias.name
            found.add(whole if whole in MODULES else module)
    return {target for target in found if target in MODULES and target != name}


GRAPH = {name: _imports(name) for name in MODULES}
LAYER = {unit: number for number, units in enumerate(LAYERS) for unit in units}


def test_every_unit_has_a_layer() -> None:
    """Each top-level package and module of tokenrelay is placed in exactly one layer."""
    units = {_unit(name) for name in MODULES}
    placed = [unit for layer in LAYERS for unit in layer]
    assert sorted(placed) == sorted(set(placed))
    assert units - set(placed) == set()


def test_no_import_circle() -> None:
    """No module of tokenrelay imports, even for typing only or inside a function, one that imports
    it back, directly or round a longer circle."""
    graph = {name: {t for t in targets if (name, t) not in EXCEPTIONS} for name, targets in GRAPH.items()}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_no_import_from_a_lower_layer_into_a_higher_one() -> None:
    """A unit imports only units of lower layers: none of its own layer (a product imports no other
    product) and none above it (the kit imports no product, no subcommand imports cli)."""
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if _unit(name) != _unit(target)
        and LAYER[_unit(target)] >= LAYER[_unit(name)]
        and (name, target) not in EXCEPTIONS
    )
    assert upward == []


def test_products_take_from_run_only_run_itself() -> None:
    """exec, dev and the doctor import run's daemon (and its start-up, --once and settings), never the serving
    kit through sidecar/: what several commands share lives in serving/."""
    taken_by_others = {
        target
        for name, targets in GRAPH.items()
        for target in targets
        if _unit(target) == "sidecar" and _unit(name) != "sidecar"
    }
    assert taken_by_others <= RUN_ITSELF, sorted(taken_by_others - RUN_ITSELF)


def test_every_exception_is_still_needed() -> None:
    """Each named exception is an import that still exists, so that the list shrinks as the work
    that removes it lands."""
    gone = sorted(f"{a} -> {b}" for a, b in EXCEPTIONS if b not in GRAPH.get(a, set()))
    assert gone == []
