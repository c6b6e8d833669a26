"""What a platform the emulator plays is: its issuer and claims, and what its endpoints mint with.

Each platform's module (named as the source of ``tokens/idsources/`` it serves) declares its
``PLATFORM`` (the real issuer, subject format and claims, with the page they come from) and, when
the platform has an HTTP token endpoint, ``routes(minter)``: the endpoints answering in the
platform's own format, refusals included, because that is what the sources read. ``registry``
gathers them into one table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

ORG_UUID = "8d3c7a2e-4f5b-4c1d-9e0a-2b6f1a7c9d30"  # the organization of the CI platforms played here
COMMIT = "0c1f8e5e3b6a4d2f9c7b1a0e8d6c4b2a09f7e5d3"  # the commit their jobs build

PLATFORM_LIFETIME = 900.0  # seconds: GitHub's and Buildkite's tokens live minutes, not hours

Claims = Callable[[str], dict[str, Any]]  # audience -> the claims beyond iss, aud, iat, nbf, exp, jti
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str, Handler]  # HTTP method, path, handler


@dataclass(frozen=True, slots=True)
class Platform:
    """One platform the emulator plays."""

    name: str  # the --id-token-source that reads it
    issuer: str
    claims: Claims
    default_audience: str
    source: str  # where the claim shapes come from


class Minter(Protocol):
    """What a platform's endpoints mint with: ``registry.PlatformEndpoints``."""

    def mint(self, name: str, audience: str | None) -> str:
        """A token of platform ``name`` for ``audience`` (its default audience if None), counted."""
        ...

    def lifetime(self) -> float:
        """Seconds the platform tokens minted now live."""
        ...

    def wall(self) -> float: ...


def bearer(request: web.Request) -> str:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


async def json_object(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; {} for anything else, as the platforms' lenient endpoints read it."""
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
