"""Tokens a CI system puts in an environment variable for the job: set once, never renewed.

Such a token can only be exchanged while it lives. At every read it is checked against how long the
job is likely to run (the platform's own figure when it gives one): if it expires first, one warning
per token says so, and the doctor reports the same.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...errors import IdTokenError
from ...lite.names import where
from ...lite.redact import fingerprint
from .base import IdToken, Source, SourceInputs, checked

ENV_SETTING = where("id_token_env")
GITLAB_DEFAULT_VARIABLE = "TOKENRELAY_ID_TOKEN"
BITBUCKET_VARIABLE = "BITBUCKET_STEP_OIDC_TOKEN"


@dataclass(slots=True)
class VariableSource(Source):
    """A token in an environment variable, read afresh at every exchange."""

    fixed = True

    variable: str
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    wall: Callable[[], float] = time.time
    description: str = ""
    warned: str = field(default="", repr=False)  # fingerprint of the token last warned about

    def __post_init__(self) -> None:
        self.description = f"{self.platform} variable {self.variable}"

    async def read(self) -> IdToken:
        value = self.environ.get(self.variable)
        if value is None:
            raise IdTokenError(self.unset())
        token = checked(value, self.description, self.wall)
        self.warn_if_short(token)
        return token

    def unset(self) -> str:
        """What ``read`` says when the variable is not set."""
        return f"{self.description} is not set"

    def renewal(self) -> str:
        return (
            f"{self.platform} sets {self.variable} once for the job and tokenrelay cannot renew it: use "
            "the platform's minting source where it has one (see docs/platforms/), or give the token a "
            "lifetime as long as the job"
        )

    def warn_if_short(self, token: IdToken) -> None:
        seen = fingerprint(token.value)
        if seen == self.warned:
            return
        self.warned = seen
        short = self.shortfall(token.expiry, self.wall())
        if short:
            import logging  # run's settings read the table of sources: stay cheap

            logging.getLogger("tokenrelay").warning(short, extra={"source": self.name, "idToken": seen})


@dataclass(slots=True)
class EnvSource(VariableSource):
    """An environment variable named by --id-token-env, set by whatever starts tokenrelay."""

    name = "env"
    platform = "an environment variable"
    setup = f"name the variable that holds the OIDC token with {ENV_SETTING}"
    options = ("id_token_env",)
    required = ("id_token_env",)

    named_by: str = "--id-token-env"

    def __post_init__(self) -> None:
        self.description = f"environment variable {self.variable}"

    @classmethod
    def build(cls, inputs: SourceInputs) -> EnvSource:
        assert inputs.id_token_env is not None  # config requires it (``required``)
        named_by = inputs.spell("id_token_env").split(" (env ")[0]  # the flag alone, or the variable
        return cls(inputs.id_token_env, inputs.environ, inputs.wall, named_by=named_by)

    async def read(self) -> IdToken:
        value = self.environ.get(self.variable)
        if value is None:
            raise IdTokenError(f"environment variable {self.variable} (named by {self.named_by}) is not set")
        return checked(value, self.description, self.wall)

    def fix(self) -> str:
        return f"export the OIDC token in {self.variable} where tokenrelay runs"

    def renewal(self) -> str:
        return f"export a fresh OIDC token in {self.variable}: whatever sets it has stopped renewing it"


@dataclass(slots=True)
class GitLabSource(VariableSource):
    """GitLab CI: the job's ``id_tokens:`` entry, a variable named by --id-token-env."""

    name = "gitlab"
    platform = "GitLab CI"
    options = ("id_token_env",)
    setup = f"declare `id_tokens: {{{GITLAB_DEFAULT_VARIABLE}: {{aud: <the --auth-url>}}}}` in the job"

    @classmethod
    def build(cls, inputs: SourceInputs) -> GitLabSource:
        return cls(inputs.id_token_env or GITLAB_DEFAULT_VARIABLE, inputs.environ, inputs.wall)

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        return "GITLAB_CI=true" if environ.get("GITLAB_CI") == "true" else None

    def fix(self) -> str:
        return (
            f"declare `id_tokens: {{{self.variable}: {{aud: <the --auth-url>}}}}` in the job "
            f"(or name the job's variable with {ENV_SETTING})"
        )

    def horizon(self, now: float) -> float:
        # The job ends by its start plus its timeout, both of which GitLab tells the job.
        from datetime import datetime

        timeout, started = self.environ.get("CI_JOB_TIMEOUT"), self.environ.get("CI_JOB_STARTED_AT")
        try:
            end = datetime.fromisoformat(started or "").timestamp() + float(timeout or "")
        except ValueError:
            return super(GitLabSource, self).horizon(now)
        return max(end - now, 0.0)


@dataclass(slots=True)
class BitbucketSource(VariableSource):
    """Bitbucket Pipelines: ``BITBUCKET_STEP_OIDC_TOKEN`` of a step with ``oidc: true``."""

    name = "bitbucket"
    platform = "Bitbucket Pipelines"
    setup = f"add `oidc: true` to the step, which sets {BITBUCKET_VARIABLE}"

    @classmethod
    def build(cls, inputs: SourceInputs) -> BitbucketSource:
        return cls(BITBUCKET_VARIABLE, inputs.environ, inputs.wall)

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        return f"{BITBUCKET_VARIABLE} is set" if environ.get(BITBUCKET_VARIABLE) else None

    def fix(self) -> str:
        return self.setup
