"""Shared fixtures: a fake token service on loopback, an OIDC token file, and the installed CLI."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from tokenrelay.testing import FakeTokenService, make_jwt

from ..support.production import (
    Upstream,
)


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
