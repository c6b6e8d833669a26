"""GitHub Actions: the runner's OIDC endpoint mints a token for our audience at every exchange.

The job needs ``permissions: id-token: write``; the runner then sets ``ACTIONS_ID_TOKEN_REQUEST_URL``
(a signed URL: a secret) and ``ACTIONS_ID_TOKEN_REQUEST_TOKEN``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...errors import ConfigError
from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT
from . import httpfetch
from .base import IdToken, Source, SourceInputs, checked, signed_query

if TYPE_CHECKING:
    import aiohttp

URL_VARIABLE = "ACTIONS_ID_TOKEN_REQUEST_URL"
TOKEN_VARIABLE = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
PERMISSION = "give the job `permissions: id-token: write`"
# kept for callers of the former module: the cap on the endpoint's answer
MAX_GITHUB_ANSWER_BYTES = httpfetch.MAX_ANSWER_BYTES


@dataclass(slots=True)
class GitHubActionsSource(Source):
    """GitHub Actions' OIDC endpoint."""

    name = "github-actions"
    platform = "GitHub Actions"
    mints = True
    setup = f"{PERMISSION} (GitHub Actions)"

    session: aiohttp.ClientSession | None
    request_url: str = field(repr=False)  # carries a signed query: treat as a secret
    request_token: str = field(repr=False)
    audience: str
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = "GitHub Actions' OIDC endpoint"

    @classmethod
    def build(cls, inputs: SourceInputs) -> GitHubActionsSource:
        url, token = inputs.environ.get(URL_VARIABLE), inputs.environ.get(TOKEN_VARIABLE)
        if not (url and token):
            raise ConfigError(
                "--id-token-source github-actions needs ACTIONS_ID_TOKEN_REQUEST_URL and "
                f"ACTIONS_ID_TOKEN_REQUEST_TOKEN; {PERMISSION}"
            )
        return cls(inputs.session, url, token, inputs.audience, inputs.timeout, inputs.wall)

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        if environ.get("GITHUB_ACTIONS") == "true" and environ.get(URL_VARIABLE):
            return f"GITHUB_ACTIONS=true and {URL_VARIABLE} is set"
        return None

    async def read(self) -> IdToken:
        body = await httpfetch.fetch(
            self.session,
            "GET",
            self.request_url,
            what=self.description,
            params={"audience": self.audience},
            headers={"Authorization": f"bearer {self.request_token}", "Accept": "application/json"},
            timeout=self.timeout,
        )
        return checked(httpfetch.json_field(body, "value", self.description), self.description, self.wall)

    def secrets(self) -> tuple[str, ...]:
        return (self.request_token, *signed_query(self.request_url))

    def fix(self) -> str:
        return f"{PERMISSION} (GitHub Actions)"
