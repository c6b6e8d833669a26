"""The proxy package's modules depend on each other one way only, and its two front ends on the shared
request policy, not on each other."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import tokenrelay.proxy

PACKAGE = Path(tokenrelay.proxy.__file__).parent
FRONT_ENDS = ("http1", "http2")
# the package's own parts: the core at the top, beside the two front ends (their __init__ aside)
MODULES = {
    ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    for path in PACKAGE.rglob("*.py")
    if path.name != "__init__.py"
}
# The modules that hold the front ends together: the daemon component, and the context it hands
# every client connection (which holds the HTTP/1.1 pool).
COMPOSITION = {"server", "context"}
# The one sanctioned crossing: a connection that opens with the HTTP/2 preface is handed over.
HANDOVER = ("http1.downstream", "http2.downstream")


def _package(name: str) -> str:
    return name.rpartition(".")[0]


def imports_within_the_package(name: str) -> set[str]:
    """The package's modules that ``name`` imports, TYPE_CHECKING blocks and function bodies included."""
    path = PACKAGE.joinpath(*name.split(".")).with_suffix(".py")
    home = _package(name).split(".") if _package(name) else []
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        up = node.level - 1
        if up > len(home):
            continue  # beyond tokenrelay.proxy
        base = home[: len(home) - up]
        if node.module:
            found.add(".".join([*base, *node.module.split(".")]))
        for alias in node.names:
            found.add(".".join([*base, *(node.module.split(".") if node.module else []), alias.name]))
    return found & MODULES


GRAPH = {name: imports_within_the_package(name) for name in MODULES}


def test_no_import_cycle_in_the_proxy_package() -> None:
    """No module of tokenrelay.proxy imports, even for typing only, one that imports it back."""
    try:
        order = list(TopologicalSorter(GRAPH).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
    assert (
        order.index("http1.upstream")
        < order.index("http1.pool")
        < order.index("http1.downstream")
        < order.index("server")
    )
    # a request (the lifecycle) sits between the wire it is parsed from and the upstream it reports from
    assert order.index("http1.upstream") < order.index("http1.request") < order.index("http1.downstream")


def test_the_request_policy_imports_no_front_end() -> None:
    """The shared modules (methods, headers, refusals, policy, bearer, limits, ...) import neither
    http1/ nor http2/: what both protocols decide is decided below them."""
    core = {name for name in MODULES if not _package(name)} - COMPOSITION
    assert core >= {"methods", "headers", "refusals", "policy", "bearer", "limits", "deadline"}
    crossing = {name: sorted(GRAPH[name] - core) for name in core if GRAPH[name] - core}
    assert crossing == {}


def test_the_front_ends_do_not_import_each_other() -> None:
    """http2/ imports nothing of http1/, and http1/ only hands a connection over to http2/."""
    crossing = {
        (name, target)
        for name in MODULES
        for target in GRAPH[name]
        if _package(name) in FRONT_ENDS
        and _package(target) in FRONT_ENDS
        and _package(name) != _package(target)
    }
    assert crossing == {HANDOVER}
