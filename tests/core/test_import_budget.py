"""The standard-library-only modules the credential helpers load stay cheap: each imported alone,
without site, the way a helper starts.

Each module is imported by itself in a fresh ``python -S -X importtime``, and what it loaded is
checked against what it may load. No sidecar and no network: one short subprocess per module.
(The re-layout of issue 10 moves these modules into ``tokenrelay.lite`` and this test over the
whole package.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tokenrelay

# Never: the third-party stack and the heavy standard library.
NEVER = {"typing", "dataclasses", "asyncio", "aiohttp", "ssl", "inspect", "logging", "yarl", "multidict"}
# On a credential helper's get path (docker and git): nothing that costs start-up beyond the bare minimum.
LEAN = NEVER | {"json", "re", "enum", "socket", "urllib", "base64", "datetime", "email", "tempfile", "os"}
# What only a failure, the direct exchange or the sidecar needs: decoding, building, writing.
ROOMY = {"aip193", "stsanswer", "timestamps", "files", "oidctoken", "rules", "redact"}
STDLIB_ONLY = sorted(
    {"names", "jwtclaims", "loopback", "client", "litejson", "procenv", "lifetime", "errors"} | ROOMY
)
SRC = Path(tokenrelay.__file__).resolve().parents[1]


def loaded_by(module: str) -> set[str]:
    """Top-level names of the modules ``import tokenrelay.<module>`` loads, per -X importtime."""
    code = f"import sys; sys.path.insert(0, {str(SRC)!r}); import tokenrelay.{module}"
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


@pytest.mark.parametrize("module", STDLIB_ONLY)
def test_each_module_imports_only_what_its_budget_allows(module: str) -> None:
    """Importing one of these modules alone loads none of the banned modules (lean ones: not even
    json, re, enum, socket, urllib, base64, datetime, os)."""
    banned = NEVER if module in ROOMY else LEAN
    assert loaded_by(module) & banned == set()
