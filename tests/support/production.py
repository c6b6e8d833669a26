"""The production suite's pieces: a fake token service upstream, the installed CLI's arguments,
and tools the tests need.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenrelay.testing import FakeTokenService

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Upstream:
    """The fake token service and the URL it listens on."""

    service: FakeTokenService
    url: str


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
