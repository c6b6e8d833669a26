"""CircleCI: ``CIRCLE_OIDC_TOKEN_V2`` (else ``CIRCLE_OIDC_TOKEN``), or, where the ``circleci`` CLI is
on ``PATH``, ``circleci run oidc get --claims '{"aud": "AUD"}'`` at every exchange.

The variables hold a token for the organization's id as audience, set once for the job and valid for
an hour; the CLI mints one for our audience whenever asked, so a job of any length is served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT
from . import commands
from .base import IdToken, Source, SourceInputs, checked
from .variables import VariableSource

CLI = "circleci"
VARIABLES = ("CIRCLE_OIDC_TOKEN_V2", "CIRCLE_OIDC_TOKEN")


@dataclass(slots=True)
class CircleCiSource(Source):
    """CircleCI's ``circleci run oidc get`` for our audience."""

    name = "circleci"
    platform = "CircleCI"
    mints = True
    setup = "run tokenrelay in a CircleCI job of a project that uses OIDC (a context, or the CLI)"

    audience: str
    environ: Mapping[str, str] = field(repr=False)
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = f"`{CLI} run oidc get`"

    @classmethod
    def build(cls, inputs: SourceInputs) -> Source:
        """The CLI when it is on PATH (it can mint for our audience), else the job's variable."""
        if commands.which(CLI, inputs.environ):
            return cls(inputs.audience, inputs.environ, inputs.timeout, inputs.wall)
        variable = next((name for name in VARIABLES if inputs.environ.get(name)), VARIABLES[0])
        return CircleCiVariableSource(variable, inputs.environ, inputs.wall)

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        return "CIRCLECI=true" if environ.get("CIRCLECI") == "true" else None

    async def read(self) -> IdToken:
        import json

        claims = json.dumps({"aud": self.audience})
        text = await commands.output(
            [CLI, "run", "oidc", "get", "--claims", claims],
            environ=self.environ,
            timeout=self.timeout,
            what=self.description,
        )
        return checked(text, self.description, self.wall)

    def fix(self) -> str:
        return (
            f"{self.setup}; the `{CLI}` CLI on PATH mints only inside a job (without it, tokenrelay reads "
            f"{' or '.join(VARIABLES)})"
        )


@dataclass(slots=True)
class CircleCiVariableSource(VariableSource):
    """CircleCI's variable, when the CLI is not on PATH: its audience is the organization's id."""

    name = "circleci"
    platform = "CircleCI"
    setup = CircleCiSource.setup

    @classmethod
    def build(cls, inputs: SourceInputs) -> Source:
        return CircleCiSource.build(inputs)

    def unset(self) -> str:
        return f"neither {' nor '.join(VARIABLES)} is set"

    def fix(self) -> str:
        return (
            f"{self.setup}; to mint for the --auth-url as audience at every exchange, put the "
            f"`{CLI}` CLI on PATH"
        )
