"""Where a running emulator is found: the address it listens on by default and the variable naming its URL.

Below both ``cli`` (which serves there) and the platforms' stand-in commands (which ask it), so
neither imports the other.
"""

from __future__ import annotations

DEFAULT_LISTEN = "127.0.0.1:8787"
URL_ENV = "TOKENRELAY_EMULATOR_URL"
