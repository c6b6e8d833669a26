"""Where the platform's OIDC token comes from: a file, an environment variable, or GitHub Actions.

Every source is read afresh at every exchange: kubelet rotates a projected token file at 80% of its
life by swapping a symlink, and GitHub's tokens are short-lived, so a cached copy goes stale.
A token that is missing, empty or (when it is a JWT) already expired is refused before any request
carries it, by ``oidccheck``'s checks, which the credential helpers share. The sources take plain arguments:
``daemon.build`` chooses and builds the one the settings name.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from ..errors import IdTokenError
from ..lite.names import where
from ..lite.oidccheck import MAX_ID_TOKEN_BYTES, read_id_token_file
from ..lite.oidccheck import checked as checked_token

FILE_SETTING = where("id_token_file")
# {"count": ..., "value": "<token>"}: an OIDC token is at most 64 KiB (MAX_ID_TOKEN_BYTES).
MAX_GITHUB_ANSWER_BYTES = 2 * MAX_ID_TOKEN_BYTES


@dataclass(frozen=True, slots=True)
class IdToken:
    """An OIDC token as read, with its expiry when it is a JWT."""

    value: str = field(repr=False)
    expiry: float | None  # Unix time


class IdTokenSource(Protocol):
    """Reads the current OIDC token."""

    description: str

    async def read(self) -> IdToken: ...


def checked(raw: str, where: str, wall: Callable[[], float] = time.time) -> IdToken:
    """``raw`` as an IdToken; IdTokenError when it is empty or an expired JWT."""
    return IdToken(*checked_token(raw, where, wall))


@dataclass(slots=True)
class FileSource:
    path: str
    wall: Callable[[], float] = time.time
    description: str = ""

    def __post_init__(self) -> None:
        self.description = f"file {self.path}"

    async def read(self) -> IdToken:
        # A small local file: reading it inline costs less than a thread hop.
        return IdToken(*read_id_token_file(self.path, FILE_SETTING, self.wall))


@dataclass(slots=True)
class EnvSource:
    variable: str
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    wall: Callable[[], float] = time.time
    description: str = ""

    def __post_init__(self) -> None:
        self.description = f"environment variable {self.variable}"

    async def read(self) -> IdToken:
        value = self.environ.get(self.variable)
        if value is None:
            raise IdTokenError(f"environment variable {self.variable} (named by --id-token-env) is not set")
        return checked(value, self.description, self.wall)


@dataclass(slots=True)
class GitHubActionsSource:
    """GitHub Actions' OIDC endpoint; the job needs ``permissions: id-token: write``."""

    session: aiohttp.ClientSession
    request_url: str = field(repr=False)  # carries a signed query: treat as a secret
    request_token: str = field(repr=False)
    audience: str
    timeout: float = 10.0
    wall: Callable[[], float] = time.time
    description: str = "GitHub Actions' OIDC endpoint"

    async def read(self) -> IdToken:
        try:
            async with self.session.get(
                self.request_url,
                params={"audience": self.audience},
                headers={"Authorization": f"bearer {self.request_token}", "Accept": "application/json"},
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as response:
                if response.status != 200:
                    raise IdTokenError(
                        f"GitHub Actions' OIDC endpoint answered HTTP {response.status}; does the "
                        "job have `permissions: id-token: write`?"
                    )
                body = json.loads(await _read_capped(response, MAX_GITHUB_ANSWER_BYTES))
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise IdTokenError(
                f"cannot get an OIDC token from GitHub Actions: {type(exc).__name__}"
            ) from None
        value = body.get("value") if isinstance(body, dict) else None
        if not isinstance(value, str):
            raise IdTokenError('GitHub Actions\' OIDC endpoint answered without a "value"')
        return checked(value, self.description, self.wall)


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, refused past ``limit`` bytes before more than that is held in memory."""
    too_big = IdTokenError(
        f"GitHub Actions' OIDC endpoint answered over {limit // 1024} KiB: not an OIDC token"
    )
    if response.content_length is not None and response.content_length > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)
