"""A TCP listener that cannot bind is a setting to change, not a crash: one line naming the flag.

The proxy, the metrics port, ``tokenrelay dev``'s emulator and ``tokenrelay emulate`` all listen on
an address the user chose; a port already taken (often another process on 8080) must read like every
other bad setting, with exit status 2, not as an ``OSError`` traceback.
"""

from __future__ import annotations

import errno
import os

from ..errors import ConfigError

_WHY = {
    errno.EADDRINUSE: "the address is already in use; stop what listens there or choose another port",
    errno.EADDRNOTAVAIL: "no network interface here has that address",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def bind_error(exc: OSError, where: str, host: str, port: int) -> ConfigError:
    """The ConfigError for ``exc`` raised while binding ``host:port``, set by ``where`` (the flag)."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    why = _WHY.get(exc.errno or 0) or (os.strerror(exc.errno) if exc.errno else str(exc))
    return ConfigError(f"{where}: cannot listen on {address}: {why}")
