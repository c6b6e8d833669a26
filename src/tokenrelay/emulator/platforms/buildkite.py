"""Buildkite as the emulator plays it for the buildkite source: the agent API behind ``oidc request-token``.

``POST /platforms/buildkite/v3/jobs/<job>/oidc/tokens`` with ``Authorization: Token ACCESS_TOKEN``
and ``{"audience"}`` answers ``{"token"}`` (201), as the agent API does for ``buildkite-agent oidc
request-token``; ``tokenrelay emulate buildkite-agent`` (``commands``) is the agent that asks it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .base import COMMIT, ORG_UUID, Minter, Platform, Route, json_object


def claims(audience: str) -> dict[str, Any]:
    return {
        "sub": f"organization:acme:pipeline:app:ref:refs/heads/main:commit:{COMMIT}:step:build",
        "organization_slug": "acme",
        "organization_id": ORG_UUID,
        "pipeline_slug": "app",
        "build_number": 42,
        "build_branch": "main",
        "build_commit": COMMIT,
        "build_source": "webhook",
        "step_key": "build",
        "job_id": "0190f2c4-7a3e-4b8e-9d2c-5f1a6b7c8d9e",
        "agent_id": "0190f2c4-0000-4b8e-9d2c-5f1a6b7c8d9e",
        "runner_environment": "buildkite-hosted",
    }


PLATFORM = Platform(
    "buildkite",
    "https://agent.buildkite.com",
    claims,
    "https://buildkite.com/acme",
    "https://buildkite.com/docs/agent/v3/cli-oidc",
)


def routes(minter: Minter) -> list[Route]:
    async def token(request: web.Request) -> web.Response:
        if not request.headers.get("Authorization", "").startswith("Token "):
            return web.json_response({"message": "Unauthorized"}, status=401)
        body = await json_object(request)
        audience = body.get("audience") if isinstance(body.get("audience"), str) else None
        return web.json_response({"token": minter.mint(PLATFORM.name, audience)}, status=201)

    return [("POST", "/platforms/buildkite/v3/jobs/{job}/oidc/tokens", token)]
