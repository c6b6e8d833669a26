"""Shared fixtures: a fake token service on loopback, an OIDC token file, and the installed CLI."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from tokenrelay.testing import FakeTokenService, make_jwt

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Upstream:
    """The fake token service and the URL it listens on."""

    service: FakeTokenService
    url: str


@pytest.fixture
async def upstream(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> Upstream:
    service = FakeTokenService()
    server = await aiohttp_server(service.app())
    return Upstream(service, str(server.make_url("")).rstrip("/"))


@pytest.fixture
def id_token_file(tmp_path: Path) -> Path:
    """A projected-token-like OIDC token file, valid for ten minutes."""
    path = tmp_path / "oidc-token"
    now = int(time.time())
    path.write_text(make_jwt({"iss": "https://issuer.test", "sub": "ci", "iat": now, "exp": now + 600}))
    return path


def tool(name: str) -> str | None:
    """An executable installed next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


def require_tool(name: str) -> str:
    """The tool's path; skip when missing, unless CI is set (then the test must fail)."""
    found = tool(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed, and CI is set")
        pytest.skip(f"{name} is not installed")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def run_args(upstream: Upstream, id_token_file: Path, *extra: str) -> list[str]:
    """``tokenrelay run`` arguments wired to the fake token service."""
    return [
        "run",
        "--auth-url",
        upstream.url,
        "--api-url",
        "https://api.example.test",
        "--identity",
        "org/ci",
        "--id-token-file",
        str(id_token_file),
        "--log-format",
        "text",
        *extra,
    ]
