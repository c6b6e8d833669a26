"""Bitbucket Pipelines as the emulator plays it for the bitbucket source: its issuer and a step's claims.

Bitbucket hands a step its token in ``BITBUCKET_STEP_OIDC_TOKEN``, so there is no endpoint to play:
``tokenrelay emulate mint --platform bitbucket`` mints one to put there.
"""

from __future__ import annotations

from typing import Any

from .base import Platform


def claims(audience: str) -> dict[str, Any]:
    repository, step = "{c2d3e4f5-0000-4a5b-8c9d-0e1f2a3b4c5d}", "{d3e4f5a6-0000-4b5c-9d0e-1f2a3b4c5d6e}"
    return {
        "sub": f"{repository}:{step}",
        "workspaceUuid": "{e4f5a6b7-0000-4c5d-8e9f-2a3b4c5d6e7f}",
        "repositoryUuid": repository,
        "pipelineUuid": "{f5a6b7c8-0000-4d5e-9f0a-3b4c5d6e7f80}",
        "stepUuid": step,
        "branchName": "main",
        "accountUuid": "{a6b7c8d9-0000-4e5f-8a1b-4c5d6e7f8091}",
    }


PLATFORM = Platform(
    "bitbucket",
    "https://api.bitbucket.org/2.0/workspaces/acme/pipelines-config/identity/oidc",
    claims,
    "ari:cloud:bitbucket::workspace/e4f5a6b7-0000-4c5d-8e9f-2a3b4c5d6e7f",
    "https://support.atlassian.com/bitbucket-cloud/docs/integrate-pipelines-with-resource-servers-using-oidc/",
)
