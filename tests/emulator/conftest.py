"""Shared set-up for the emulator's tests: a running emulator with a wall clock the test can move,
an organization with one identity per role, and a small HTTP helper."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import grpc
import pytest

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.emulator.errors import IAM_DOMAIN
from tokenrelay.emulator.model import Group

from .grpc_client import Client


class Wall:
    """A wall clock that stands still unless moved."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class World:
    """An organization ``acme`` and tokens for identities bound there with each role."""

    emulator: Emulator
    url: str
    wall: Wall
    http: aiohttp.ClientSession
    org: Group
    # role (or "outsider", or a name a test adds) -> API token; never shown in a failure report
    tokens: dict[str, str] = field(repr=False)
    uids: dict[str, str]  # role (or "outsider") -> identity uid

    async def call(self, method: str, path: str, as_: str | None = "owner", **kwargs: Any) -> tuple[int, Any]:
        """``(status, parsed JSON or None)`` for a request made as the identity with role ``as_``."""
        headers = {"Authorization": f"Bearer {self.tokens[as_]}"} if as_ else {}
        headers.update(kwargs.pop("headers", {}))
        async with self.http.request(method, self.url + path, headers=headers, **kwargs) as response:
            raw = await response.read()
            return response.status, (await response.json() if raw else None)

    def group(self, parent: str, name: str) -> Group:
        return self.emulator.resources.create_group(parent, {"name": name})


@pytest.fixture
def wall() -> Wall:
    return Wall()


@pytest.fixture
async def server(wall: Wall) -> AsyncIterator[EmulatorServer]:
    async with EmulatorServer(Emulator(wall=wall)) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def client(world: World) -> AsyncIterator[Client]:
    """grpcio on the emulator's port (the same port as its HTTP API)."""
    async with grpc.aio.insecure_channel(world.url.removeprefix("http://")) as channel:
        yield Client(channel)


@pytest.fixture
def world(server: EmulatorServer, wall: Wall, http: aiohttp.ClientSession) -> World:
    emulator = server.emulator
    org = emulator.organization("acme")
    other = emulator.organization("elsewhere")
    tokens, uids = {}, {}
    for role in ("viewer", "editor", "owner"):
        identity = emulator.workload(org.uid, subject=f"sub-{role}", role=role, name=role).identity
        uids[role] = identity.uid
        tokens[role] = emulator.api_token(identity.uid)
    outsider = emulator.workload(other.uid, subject="sub-outsider", role="owner").identity
    uids["outsider"] = outsider.uid
    tokens["outsider"] = emulator.api_token(outsider.uid)
    return World(emulator, server.url, wall, http, org, tokens, uids)


def details(body: dict[str, Any], type_suffix: str) -> dict[str, Any]:
    """The detail object of a type (``ErrorInfo``, ``BadRequest``, ``PreconditionFailure``)."""
    found: list[dict[str, Any]] = [d for d in body["details"] if d["@type"].endswith("." + type_suffix)]
    assert len(found) == 1, body
    return found[0]


ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
PRECONDITION = "type.googleapis.com/google.rpc.PreconditionFailure"


def invalid(violations: list[tuple[str, str]], domain: str = IAM_DOMAIN) -> dict[str, Any]:
    """The exact body of a code-3 refusal naming these fields."""
    return {
        "code": 3,
        "message": "Invalid argument: " + "; ".join(f"{f}: {d}" for f, d in violations),
        "details": [
            {"@type": ERROR_INFO, "reason": "INVALID_ARGUMENT", "domain": domain},
            {
                "@type": BAD_REQUEST,
                "fieldViolations": [{"field": f, "description": d} for f, d in violations],
            },
        ],
    }


def simple(code: int, reason: str, message: str, domain: str = IAM_DOMAIN, **metadata: str) -> dict[str, Any]:
    info: dict[str, Any] = {"@type": ERROR_INFO, "reason": reason, "domain": domain}
    if metadata:
        info["metadata"] = metadata
    return {"code": code, "message": message, "details": [info]}


def precondition(message: str, violations: list[dict[str, str]], domain: str = IAM_DOMAIN) -> dict[str, Any]:
    """The exact body of a code-9 refusal."""
    return {
        "code": 9,
        "message": message,
        "details": [
            {"@type": ERROR_INFO, "reason": "FAILED_PRECONDITION", "domain": domain},
            {"@type": PRECONDITION, "violations": violations},
        ],
    }
