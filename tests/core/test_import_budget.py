"""The standard-library-only package stays cheap: each module imported alone, without site.

Every module of ``tokenrelay.lite`` is imported by itself in a fresh ``python -S -X importtime``, the
way a credential helper starts, and what it loaded is checked against what it may load. No sidecar
and no network: one short subprocess per module.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import tokenrelay.lite

# Never, anywhere in the package: the third-party stack and the heavy standard library.
NEVER = {"typing", "dataclasses", "asyncio", "aiohttp", "ssl", "inspect", "logging", "yarl", "multidict"}
# On a credential helper's get path (docker and git): nothing that costs start-up beyond the bare minimum.
LEAN = NEVER | {"json", "re", "enum", "socket", "urllib", "base64", "datetime", "email", "tempfile", "os"}
# The modules that decode or build what only a failure, the direct exchange or the sidecar needs.
ROOMY = {
    "aip193",
    "stsanswer",
    "timestamps",
    "files",
    "oidccheck",
    "rules",
    "redact",
    "regularfile",
    "unreachable",
}

MODULES = sorted(info.name for info in pkgutil.iter_modules(tokenrelay.lite.__path__))
SRC = Path(tokenrelay.__file__).resolve().parents[1]


def loaded_by(module: str) -> set[str]:
    """Top-level names of the modules ``import tokenrelay.lite.<module>`` loads, per -X importtime."""
    code = f"import sys; sys.path.insert(0, {str(SRC)!r}); import tokenrelay.lite.{module}"
    result = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                names.add(name.split(".")[0])
    return names


def test_the_package_is_all_found() -> None:
    """The budget covers every module of the package (a new one is covered the day it lands)."""
    assert {"names", "socketclient", "litejson", "jwtclaims"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_only_what_its_budget_allows(module: str) -> None:
    """Importing a tokenrelay.lite module alone loads none of the banned modules (lean ones: not even
    json, re, enum, socket, urllib, base64, datetime, os)."""
    banned = NEVER if module in ROOMY else LEAN
    assert loaded_by(module) & banned == set()
