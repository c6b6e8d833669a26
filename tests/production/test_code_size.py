"""No module of the package over 500 lines and no function over cyclomatic complexity 20, generated
code aside (issue 30): a reader holds a module or a function whole."""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path

import tokenrelay

PACKAGE = Path(tokenrelay.__file__).resolve().parent
MAX_LINES = 500
MAX_COMPLEXITY = 20
RUFF = Path(sysconfig.get_path("scripts")) / "ruff"  # the test extra's, beside this Python

# Modules and functions allowed over a bound for now, each with its reason; the test fails on an
# entry that is no longer over its bound, so that none stays here after its fix.
PENDING_MODULES: set[str] = set()
PENDING_FUNCTIONS: set[tuple[str, str]] = set()  # (module, function)


def _generated(path: Path) -> bool:
    return path.name.endswith("_pb2.py")  # protoc's output, never edited by hand


def long_modules() -> dict[str, int]:
    """The package's modules over MAX_LINES lines, with their length."""
    lengths = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _generated(path)
    }
    return {name: lines for name, lines in lengths.items() if lines > MAX_LINES}


def ruff_c901(path: Path) -> list[dict[str, str]]:
    """ruff's mccabe check (C901) over ``path`` at MAX_COMPLEXITY: one finding per function over it."""
    found = subprocess.run(
        [
            str(RUFF),
            "check",
            "--isolated",  # this one rule, whatever the project's configuration selects
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--exclude",
            "*_pb2.py",
            "--output-format",
            "json",
            "--exit-zero",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    findings: list[dict[str, str]] = json.loads(found.stdout)
    return findings


def complex_functions() -> dict[tuple[str, str], str]:
    """The package's functions over MAX_COMPLEXITY, by (module, function)."""
    over: dict[tuple[str, str], str] = {}
    for item in ruff_c901(PACKAGE):
        module = Path(item["filename"]).resolve().relative_to(PACKAGE).as_posix()
        over[module, item["message"].split("`")[1]] = item["message"]
    return over


def test_no_module_is_over_500_lines() -> None:
    """Every module of the package, generated code aside, has at most 500 lines (a few pending ones
    listed above, each still over)."""
    long = long_modules()
    assert {name: lines for name, lines in long.items() if name not in PENDING_MODULES} == {}, (
        f"split these modules to {MAX_LINES} lines or fewer"
    )
    assert sorted(PENDING_MODULES - set(long)) == [], "no longer over the bound: drop from PENDING_MODULES"


def test_no_function_is_over_complexity_20() -> None:
    """Every function of the package, generated code aside, has a cyclomatic complexity of at most 20
    (ruff's C901; a few pending ones listed above, each still over)."""
    over = complex_functions()
    assert {key: why for key, why in over.items() if key not in PENDING_FUNCTIONS} == {}, (
        f"split these functions to complexity {MAX_COMPLEXITY} or less"
    )
    assert sorted(PENDING_FUNCTIONS - set(over)) == [], (
        "no longer over the bound: drop from PENDING_FUNCTIONS"
    )


def test_the_checks_see_what_they_bound(tmp_path: Path) -> None:
    """The complexity check reads ruff's verdicts: a function of 21 branches is found (so that an
    empty answer means none, not a check that reads nothing)."""
    branches = "\n".join(f"    if x == {n}:\n        return {n}" for n in range(21))
    source = tmp_path / "branchy.py"
    source.write_text(f"def branchy(x: int) -> int:\n{branches}\n    return -1\n")
    messages = [item["message"] for item in ruff_c901(source)]
    assert messages == ["`branchy` is too complex (22 > 20)"]
