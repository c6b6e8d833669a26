"""An emulator of the upstream (``docs/emulator.md``): platform OIDC issuer, token service and API.

async with EmulatorServer(Emulator()) as server:
    org = server.emulator.organization("acme")
    workload = server.emulator.workload(org.uid, subject="ci")

The names load on first use (PEP 562): the platforms' stand-in commands (``tokenrelay emulate
buildkite-agent``, run once per exchange) and ``emulate mint`` import ``emulator.cli`` without paying
for aiohttp and the API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import Emulator, EmulatorServer, Workload
    from .iam.store import Store
    from .platforms.local import RotatingTokenFile

_HOMES = {
    "Emulator": "app",
    "EmulatorServer": "app",
    "Workload": "app",
    "Store": "iam.store",
    "RotatingTokenFile": "platforms.local",
}

__all__ = ["Emulator", "EmulatorServer", "RotatingTokenFile", "Store", "Workload"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
