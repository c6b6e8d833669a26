"""GitLab CI as the emulator plays it for the gitlab source: its issuer and a job's ID token claims.

GitLab hands a job its token in a variable (``id_tokens:``), so there is no endpoint to play:
``tokenrelay emulate mint --platform gitlab`` mints one to put there.
"""

from __future__ import annotations

from typing import Any

from .base import Platform


def claims(audience: str) -> dict[str, Any]:
    return {
        "sub": "project_path:acme/app:ref_type:branch:ref:main",
        "namespace_id": "1000001",
        "namespace_path": "acme",
        "project_id": "2000001",
        "project_path": "acme/app",
        "user_id": "3000001",
        "user_login": "dev",
        "pipeline_id": "4000001",
        "pipeline_source": "push",
        "job_id": "5000001",
        "ref": "main",
        "ref_type": "branch",
        "ref_path": "refs/heads/main",
        "ref_protected": "true",
        "runner_environment": "gitlab-hosted",
    }


PLATFORM = Platform(
    "gitlab",
    "https://gitlab.com",
    claims,
    "https://gitlab.com",
    "https://docs.gitlab.com/ci/secrets/id_token_authentication/",
)
