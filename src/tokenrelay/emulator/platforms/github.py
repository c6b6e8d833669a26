"""GitHub Actions as the emulator plays it for the github-actions source: the runner's OIDC endpoint.

``GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=AUD`` with the request token as a bearer (actions/toolkit's
``getIDToken``) answers ``{"count", "value"}``; without a bearer, 401 in GitHub's words.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .base import COMMIT, Minter, Platform, Route, bearer


def claims(audience: str) -> dict[str, Any]:
    return {
        "sub": "repo:acme/app:ref:refs/heads/main",
        "repository": "acme/app",
        "repository_owner": "acme",
        "repository_id": "690000001",
        "repository_owner_id": "1000001",
        "repository_visibility": "private",
        "ref": "refs/heads/main",
        "ref_type": "branch",
        "sha": COMMIT,
        "workflow": "ci",
        "workflow_ref": "acme/app/.github/workflows/ci.yml@refs/heads/main",
        "job_workflow_ref": "acme/app/.github/workflows/ci.yml@refs/heads/main",
        "event_name": "push",
        "actor": "octocat",
        "actor_id": "583231",
        "run_id": "7000000001",
        "run_number": "42",
        "run_attempt": "1",
        "runner_environment": "github-hosted",
    }


PLATFORM = Platform(
    "github-actions",
    "https://token.actions.githubusercontent.com",
    claims,
    "https://github.com/acme",
    "https://docs.github.com/en/actions/reference/security/oidc",
)


def routes(minter: Minter) -> list[Route]:
    async def token(request: web.Request) -> web.Response:
        if not bearer(request):
            return web.json_response({"message": "Unable to authorize request"}, status=401)
        token = minter.mint(PLATFORM.name, request.query.get("audience"))
        return web.json_response({"count": len(token), "value": token})

    return [("GET", "/platforms/github-actions/token", token)]
