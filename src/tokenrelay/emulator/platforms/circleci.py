"""CircleCI as the emulator plays it for the circleci source: the endpoint ``circleci run oidc get`` asks.

``POST /platforms/circleci/oidc`` with ``{"claims": {"aud": AUD}}`` answers ``{"token"}``;
``tokenrelay emulate circleci`` (``commands``) is the CLI that asks it. The job's own variables
(``CIRCLE_OIDC_TOKEN_V2``) are minted with ``tokenrelay emulate mint --platform circleci``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .base import ORG_UUID, Minter, Platform, Route, json_object


def claims(audience: str) -> dict[str, Any]:
    project = "a1b2c3d4-0000-4e5f-8a9b-0c1d2e3f4a5b"
    return {
        "sub": f"org/{ORG_UUID}/project/{project}/user/b2c3d4e5-0000-4f5a-9b0c-1d2e3f4a5b6c",
        "oidc.circleci.com/project-id": project,
        "oidc.circleci.com/context-ids": [],
        "oidc.circleci.com/vcs-origin": "github.com/acme/app",
        "oidc.circleci.com/vcs-ref": "refs/heads/main",
    }


PLATFORM = Platform(
    "circleci",
    f"https://oidc.circleci.com/org/{ORG_UUID}",
    claims,
    ORG_UUID,
    "https://circleci.com/docs/openid-connect-tokens/",
)


def routes(minter: Minter) -> list[Route]:
    async def token(request: web.Request) -> web.Response:
        body = await json_object(request)
        asked = body.get("claims")
        audience = asked.get("aud") if isinstance(asked, dict) else None
        return web.json_response(
            {"token": minter.mint(PLATFORM.name, audience if isinstance(audience, str) else None)}
        )

    return [("POST", "/platforms/circleci/oidc", token)]
