"""The emulator suite's world: an emulator on loopback, its wall clock, and AIP-193 detail readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.errors import IAM_DOMAIN
from tokenrelay.emulator.iam import groups
from tokenrelay.emulator.iam.kinds import Group
from tokenrelay.testing import FakeClock


class Wall:
    """A wall clock that stands still unless moved: a FakeClock's wall, called, read or advanced."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock()

    def __call__(self) -> float:
        return self.clock.wall()

    @property
    def now(self) -> float:
        return self.clock.wall()

    def advance(self, seconds: float) -> None:
        self.clock.jump_wall(seconds)


@dataclass
class World:
    """An organization ``acme`` and tokens for identities bound there with each role."""

    emulator: Emulator
    url: str
    clock: FakeClock  # the emulator runs on its wall (``clock.wall``); ``clock.jump_wall`` moves it
    http: aiohttp.ClientSession
    org: Group
    # role (or "outsider", or a name a test adds) -> API token; never shown in a failure report
    tokens: dict[str, str] = field(repr=False)
    uids: dict[str, str]  # role (or "outsider") -> identity uid

    @property
    def wall(self) -> Wall:
        return Wall(self.clock)

    async def call(self, method: str, path: str, as_: str | None = "owner", **kwargs: Any) -> tuple[int, Any]:
        """``(status, parsed JSON or None)`` for a request made as the identity with role ``as_``."""
        headers = {"Authorization": f"Bearer {self.tokens[as_]}"} if as_ else {}
        headers.update(kwargs.pop("headers", {}))
        async with self.http.request(method, self.url + path, headers=headers, **kwargs) as response:
            raw = await response.read()
            return response.status, (await response.json() if raw else None)

    def group(self, parent: str, name: str) -> Group:
        return groups.create(self.emulator.resources, parent, {"name": name})


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
