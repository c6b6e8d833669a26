"""The emulator suite's world: an emulator on loopback, its wall clock, and AIP-193 detail readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.model import Group
from tokenrelay.testing import FakeClock


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

    def wall(self) -> float:
        return self.clock.wall()

    async def call(self, method: str, path: str, as_: str | None = "owner", **kwargs: Any) -> tuple[int, Any]:
        """``(status, parsed JSON or None)`` for a request made as the identity with role ``as_``."""
        headers = {"Authorization": f"Bearer {self.tokens[as_]}"} if as_ else {}
        async with self.http.request(method, self.url + path, headers=headers, **kwargs) as response:
            raw = await response.read()
            return response.status, (await response.json() if raw else None)

    def group(self, parent: str, name: str) -> Group:
        return self.emulator.resources.create_group(parent, {"name": name})


def details(body: dict[str, Any], type_suffix: str) -> dict[str, Any]:
    """The detail object of a type (``ErrorInfo``, ``BadRequest``, ``PreconditionFailure``)."""
    found: list[dict[str, Any]] = [d for d in body["details"] if d["@type"].endswith("." + type_suffix)]
    assert len(found) == 1, body
    return found[0]
