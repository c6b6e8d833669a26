"""Buildkite: ``buildkite-agent oidc request-token --audience AUD`` mints a token at every exchange.

The agent on ``PATH`` talks to Buildkite with the job's own ``BUILDKITE_AGENT_ACCESS_TOKEN`` (and
honours ``BUILDKITE_AGENT_ENDPOINT``), so tokenrelay passes its environment through unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT
from . import commands
from .base import IdToken, Source, SourceInputs, checked

AGENT = "buildkite-agent"
ACCESS_VARIABLE = "BUILDKITE_AGENT_ACCESS_TOKEN"  # the job's credential, which the agent sends


@dataclass(slots=True)
class BuildkiteSource(Source):
    """The Buildkite agent's ``oidc request-token``."""

    name = "buildkite"
    platform = "Buildkite"
    mints = True
    setup = f"run tokenrelay in a Buildkite job step, where {AGENT} is on PATH"

    audience: str
    environ: Mapping[str, str] = field(repr=False)
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = f"`{AGENT} oidc request-token`"

    @classmethod
    def build(cls, inputs: SourceInputs) -> BuildkiteSource:
        return cls(inputs.audience, inputs.environ, inputs.timeout, inputs.wall)

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        return "BUILDKITE=true" if environ.get("BUILDKITE") == "true" else None

    async def read(self) -> IdToken:
        text = await commands.output(
            [AGENT, "oidc", "request-token", "--audience", self.audience],
            environ=self.environ,
            timeout=self.timeout,
            what=self.description,
        )
        return checked(text, self.description, self.wall)

    def secrets(self) -> tuple[str, ...]:
        return (self.environ.get(ACCESS_VARIABLE, ""),)

    def fix(self) -> str:
        return f"{self.setup}; the agent needs its job's {ACCESS_VARIABLE}"
