"""Fixtures of the end-to-end suite: the emulator with an installed sidecar and its proxy in front."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tokenrelay.emulator import Emulator, EmulatorServer

from ..support.e2e import SUBJECT, Stack, free_port, sidecar


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    if shutil.which("curl") is None:
        if os.environ.get("CI"):
            pytest.fail("curl is missing: .ci/run installs it")
        pytest.skip("curl is not installed")
    emulator = Emulator()
    async with EmulatorServer(emulator) as server:
        org = emulator.organization("shop")
        workload = emulator.workload(org.uid, SUBJECT, role="viewer", name="checkout")
        (tmp_path / "oidc-token").write_text(emulator.mint(SUBJECT, server.url, 600))
        proxy_port = free_port()
        sock, process = await sidecar(tmp_path, server.url, workload.identity.uid, proxy_port)
        try:
            yield Stack(
                emulator,
                server.url,
                org.uid,
                workload.identity.uid,
                sock,
                f"http://127.0.0.1:{proxy_port}",
                process,
            )
        finally:
            if process.returncode is None:
                process.terminate()
                await process.wait()
