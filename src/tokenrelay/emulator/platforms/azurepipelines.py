"""Azure Pipelines as the emulator plays it for the azure-pipelines source: the job's ``oidctoken`` endpoint.

``POST $SYSTEM_OIDCREQUESTURI?api-version=7.1&serviceConnectionId=ID`` with the job's access token
as a bearer answers ``{"oidcToken"}``, for Entra ID's fixed audience; its refusals are Azure
DevOps' own words.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .base import ORG_UUID, Minter, Platform, Route, bearer


def claims(audience: str) -> dict[str, Any]:
    return {"sub": "sc://acme/app/deploy"}


PLATFORM = Platform(
    "azure-pipelines",
    f"https://vstoken.dev.azure.com/{ORG_UUID}",
    claims,
    "api://AzureADTokenExchange",
    "https://learn.microsoft.com/en-us/azure/devops/pipelines/release/troubleshoot-workload-identity",
)


def routes(minter: Minter) -> list[Route]:
    async def token(request: web.Request) -> web.Response:
        if not bearer(request):
            return web.json_response(
                {"message": "TF400813: The user is not authorized to access this resource."}, status=401
            )
        if request.query.get("api-version") is None:
            return web.json_response(
                {"message": "No api-version was supplied for the POST request."}, status=400
            )
        if not request.query.get("serviceConnectionId"):
            return web.json_response(
                {"message": "The service connection does not exist or has not been authorized for use."},
                status=400,
            )
        # its audience is fixed: Entra ID's token exchange
        return web.json_response({"oidcToken": minter.mint(PLATFORM.name, None)})

    return [("POST", "/platforms/azure-pipelines/oidctoken", token)]
