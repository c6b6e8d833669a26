"""The table of OIDC token sources is cheap to read: run's settings (so every command's parser) import it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tokenrelay

# What would make `tokenrelay token`'s parser, or a credential helper's direct exchange, pay for what
# only a source that runs (an HTTP request, a command, a log line) needs.
HEAVY = ("aiohttp", "asyncio", "ssl", "subprocess", "logging", "datetime", "json", "shutil")


def test_reading_the_sources_table_loads_nothing_heavy() -> None:
    """Importing run's settings (they read idsources.SOURCES) loads no aiohttp, asyncio, ssl, logging."""
    src = str(Path(tokenrelay.__file__).resolve().parents[1])
    code = (
        f"import sys; sys.path.insert(0, {src!r}); before = set(sys.modules); "
        "import tokenrelay.sidecar.settings; "
        f"print(sorted(m for m in {HEAVY!r} if m in set(sys.modules) - before))"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
