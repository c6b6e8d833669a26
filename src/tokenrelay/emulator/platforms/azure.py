"""Azure managed identity as the emulator plays it for the azure source: IMDS and App Service's endpoint.

The instance metadata service (``GET /metadata/identity/oauth2/token``, header ``Metadata: true``)
and App Service's identity endpoint (``GET /platforms/azure/msi/token``, header
``X-IDENTITY-HEADER``) answer ``api-version`` and ``resource`` with a token for that resource, in
Entra ID's JSON; their refusals are ``{"error", "error_description"}`` as Azure words them.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .base import Minter, Platform, Route

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


def claims(audience: str) -> dict[str, Any]:
    principal = "9a8b7c6d-0000-4e5f-a1b2-c3d4e5f60718"
    return {
        "sub": principal,
        "oid": principal,
        "tid": TENANT,
        "appid": "0f1e2d3c-0000-4b5a-8c9d-e0f1a2b3c4d5",
        "appidacr": "2",
        "idp": f"https://sts.windows.net/{TENANT}/",
        "idtyp": "app",
        "ver": "1.0",
        "xms_mirid": "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/acme/providers/"
        "Microsoft.ManagedIdentity/userAssignedIdentities/app",
    }


PLATFORM = Platform(
    "azure",
    f"https://sts.windows.net/{TENANT}/",
    claims,
    "",
    "https://learn.microsoft.com/en-us/entra/identity-platform/access-token-claims-reference",
)


def routes(minter: Minter) -> list[Route]:
    def answer(request: web.Request) -> web.Response:
        resource = request.query.get("resource")
        if not request.query.get("api-version"):
            return _error("invalid_request", "Required query variable 'api-version' is missing", 400)
        if not resource:
            return _error("invalid_resource", "AADSTS500011: The resource principal was not found", 400)
        token = minter.mint(PLATFORM.name, resource)
        now, lifetime = int(minter.wall()), int(minter.lifetime())
        return web.json_response(
            {
                "access_token": token,
                "expires_in": str(lifetime),
                "expires_on": str(now + lifetime),
                "not_before": str(now),
                "resource": resource,
                "token_type": "Bearer",
            }
        )

    async def imds(request: web.Request) -> web.Response:
        if request.headers.get("Metadata") != "true":
            return _error("invalid_request", "Required metadata header not specified", 400)
        return answer(request)

    async def app_service(request: web.Request) -> web.Response:
        if not request.headers.get("X-IDENTITY-HEADER"):
            return _error("invalid_request", "X-IDENTITY-HEADER is missing", 400)
        return answer(request)

    return [
        ("GET", "/metadata/identity/oauth2/token", imds),
        ("GET", "/platforms/azure/msi/token", app_service),
    ]


def _error(error: str, description: str, status: int) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=status)
