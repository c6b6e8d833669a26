"""An emulator of the upstream (``docs/emulator.md``): platform OIDC issuer, token service and API.

async with EmulatorServer(Emulator()) as server:
    org = server.emulator.organization("acme")
    workload = server.emulator.workload(org.uid, subject="ci")
"""

from .app import Emulator, EmulatorServer, Workload
from .store import Store
from .tokenfile import RotatingTokenFile

__all__ = ["Emulator", "EmulatorServer", "RotatingTokenFile", "Store", "Workload"]
