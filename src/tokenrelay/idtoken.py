"""Where the platform's OIDC token comes from: a file, an environment variable, or GitHub Actions.

Every source is read afresh at every exchange: kubelet rotates a projected token file at 80% of its
life by swapping a symlink, and GitHub's tokens are short-lived, so a cached copy goes stale.
A token that is missing, empty or (when it is a JWT) already expired is refused here, before any
request carries it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import aiohttp

from .config import Settings
from .errors import ConfigError, IdTokenError
from .jwtclaims import numeric_claim, unverified_claims
from .timestamps import format_timestamp

MAX_ID_TOKEN_BYTES = 64 * 1024


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
    """``raw`` as an IdToken, or IdTokenError when it is empty or an expired JWT."""
    value = raw.strip()
    if not value:
        raise IdTokenError(f"the OIDC token in {where} is empty")
    claims = unverified_claims(value)
    expiry = numeric_claim(claims, "exp") if claims else None
    if expiry is not None and expiry <= wall():
        raise IdTokenError(
            f"the OIDC token in {where} expired at {format_timestamp(expiry)}; "
            "whatever writes it (kubelet, the CI runner) has stopped renewing it"
        )
    return IdToken(value=value, expiry=expiry)


@dataclass(slots=True)
class FileSource:
    path: str
    wall: Callable[[], float] = time.time
    description: str = ""

    def __post_init__(self) -> None:
        self.description = f"file {self.path}"

    async def read(self) -> IdToken:
        # A small local file: reading it inline costs less than a thread hop.
        try:
            with Path(self.path).open("rb") as f:  # noqa: ASYNC230
                raw = f.read(MAX_ID_TOKEN_BYTES + 1)
        except FileNotFoundError:
            raise IdTokenError(
                f"no OIDC token file at {self.path}: mount the platform's token there or point "
                "--id-token-file (env TOKENRELAY_ID_TOKEN_FILE) at it"
            ) from None
        except IsADirectoryError:
            raise IdTokenError(
                f"the OIDC token path {self.path} is a directory, not a file; "
                "point --id-token-file at the token file inside it"
            ) from None
        except OSError as exc:
            raise IdTokenError(
                f"cannot read the OIDC token file {self.path}: {exc.strerror or exc}"
            ) from None
        if len(raw) > MAX_ID_TOKEN_BYTES:
            raise IdTokenError(f"the OIDC token file {self.path} is over 64 KiB: not a token")
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            raise IdTokenError(f"the OIDC token file {self.path} is not ASCII text") from None
        return checked(text, f"file {self.path}", self.wall)


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
                body = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise IdTokenError(
                f"cannot get an OIDC token from GitHub Actions: {type(exc).__name__}"
            ) from None
        value = body.get("value") if isinstance(body, dict) else None
        if not isinstance(value, str):
            raise IdTokenError('GitHub Actions\' OIDC endpoint answered without a "value"')
        return checked(value, self.description, self.wall)


def from_settings(
    settings: Settings, session: aiohttp.ClientSession, environ: Mapping[str, str] | None = None
) -> IdTokenSource:
    """The source the settings name; raises ConfigError when its inputs are missing."""
    env = os.environ if environ is None else environ
    if settings.id_token_source == "env":
        assert settings.id_token_env is not None  # config._check guarantees it
        return EnvSource(settings.id_token_env, env)
    if settings.id_token_source == "github-actions":
        url = env.get("ACTIONS_ID_TOKEN_REQUEST_URL")
        token = env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        if not url or not token:
            raise ConfigError(
                "--id-token-source github-actions needs ACTIONS_ID_TOKEN_REQUEST_URL and "
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN; give the job `permissions: id-token: write`"
            )
        return GitHubActionsSource(
            session,
            url,
            token,
            settings.id_token_audience or settings.auth_url,
            timeout=settings.exchange_timeout,
        )
    return FileSource(settings.id_token_file)
