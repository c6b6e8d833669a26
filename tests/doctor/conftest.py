"""The doctor suite's fixtures: the emulator as the platform, and a user's environment with a temporary
HOME holding the clients' config files. What the tests import is in tests/support/doctor.py."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tokenrelay.emulator import Emulator, EmulatorServer

from ..support.doctor import BIN, SUBJECT, Platform
from ..support.platforms import spiffe_socket


@pytest.fixture
async def platform(tmp_path: Path) -> AsyncIterator[Platform]:
    with spiffe_socket() as socket_path:
        async with EmulatorServer(Emulator(), spiffe_socket=socket_path) as server:
            org = server.emulator.organization("acme")
            identity = server.emulator.workload(org.uid, subject=SUBJECT).identity.uid
            found = Platform(server, identity, tmp_path / "oidc-token")
            found.write_token()
            yield found


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    """A user's environment with an empty HOME of its own: no system git config, no real files."""
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "run").mkdir()
    return {
        "HOME": str(home),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "GIT_CONFIG_NOSYSTEM": "1",
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "TOKENRELAY_SOCKET": str(tmp_path / "no-sidecar.sock"),
    }
