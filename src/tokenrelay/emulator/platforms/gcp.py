"""Google Cloud as the emulator plays it for the gcp source: the metadata server's identity endpoint.

``GET /computeMetadata/v1/instance/service-accounts/default/identity?audience=AUD`` with
``Metadata-Flavor: Google`` answers the ID token as text (point ``GCE_METADATA_HOST`` at the emulator).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .base import Minter, Platform, Route

PROJECT_NUMBER = "123456789012"


def claims(audience: str) -> dict[str, Any]:
    return {
        "sub": "109876543210987654321",
        "azp": "109876543210987654321",
        "email": f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com",
        "email_verified": True,
        "google": {
            "compute_engine": {
                "project_id": "acme-app",
                "project_number": int(PROJECT_NUMBER),
                "zone": "europe-west1-b",
                "instance_id": "4203012345678901234",
                "instance_name": "app-1",
            }
        },
    }


PLATFORM = Platform(
    "gcp",
    "https://accounts.google.com",
    claims,
    "",
    "https://cloud.google.com/compute/docs/instances/verifying-instance-identity",
)


def routes(minter: Minter) -> list[Route]:
    async def identity(request: web.Request) -> web.Response:
        if request.headers.get("Metadata-Flavor") != "Google":
            return web.Response(text="Missing Metadata-Flavor:Google header.", status=403)
        audience = request.query.get("audience")
        if not audience:
            return web.Response(text="non-empty audience parameter required", status=400)
        token = minter.mint(PLATFORM.name, audience)
        return web.Response(text=token, headers={"Metadata-Flavor": "Google"})

    return [("GET", "/computeMetadata/v1/instance/service-accounts/default/identity", identity)]
