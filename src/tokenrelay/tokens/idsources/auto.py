"""``--id-token-source auto``: the source the environment points to, in one documented order.

1. A workload-identity token file: ``AZURE_FEDERATED_TOKEN_FILE``, else a file at --id-token-file
   (Kubernetes' projected token).
2. A CI system, by its own markers: GitHub Actions, GitLab CI, Buildkite, CircleCI, Bitbucket
   Pipelines, Azure Pipelines.
3. SPIFFE: ``SPIFFE_ENDPOINT_SOCKET`` is set.
4. A cloud: AWS by the variables its platforms set for a role (the container credentials endpoint,
   a web identity token file), Azure's App Service identity endpoint by its variables; then the
   clouds are asked together at the first exchange (AWS's credential chain and STS, Azure IMDS, GCP's
   metadata server), with short timeouts, and the first in this order that hands out a token wins.

Steps 1-3 and the marked clouds are decided when tokenrelay starts, from the environment alone; one
log line names the source chosen and why. Once chosen, the source is kept.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...errors import ConfigError, IdTokenError
from .base import IdToken, Source, SourceInputs
from .platforms import PLATFORMS

ORDER: tuple[str, ...] = (
    # 1. workload-identity token files
    "file",
    # 2. CI systems, by their own markers
    "github-actions",
    "gitlab",
    "buildkite",
    "circleci",
    "bitbucket",
    "azure-pipelines",
    # 3. SPIFFE, by SPIFFE_ENDPOINT_SOCKET
    "spiffe",
    # 4. clouds: first by markers (AWS's container and web identity variables, Azure's
    # IDENTITY_ENDPOINT), then by asking them
    "aws",
    "azure",
    "gcp",
)
# Total time a metadata server gets to hand out a token while auto is still looking (the connection
# itself has base.METADATA_CONNECT_TIMEOUT): off that cloud, the first exchange waits this at most.
PROBE_TIMEOUT = 2.0


@dataclass(slots=True)
class AutoSource(Source):
    """Detects the platform's source, then reads through it."""

    name = "auto"
    platform = "the platform detected"
    setup = "choose the platform's source with --id-token-source (see docs/platforms/)"
    options = tuple(dict.fromkeys(option for source in PLATFORMS.values() for option in source.options))

    inputs: SourceInputs = field(repr=False)
    chosen: Source | None = None
    why: str = ""
    announced: bool = False
    probed: tuple[str, ...] = field(default=(), repr=False)  # the secrets of the sources last asked
    description: str = "auto: the cloud's metadata server, asked at the first exchange"

    @classmethod
    def build(cls, inputs: SourceInputs) -> AutoSource:
        auto = cls(inputs)
        for name in ORDER:
            found = PLATFORMS[name].detect(inputs)  # ConfigError: this platform, but an input is missing
            if found is not None:
                auto._choose(*found)
                break
        return auto

    def _choose(self, why: str, source: Source) -> None:
        self.chosen, self.why = source, why
        self.description = f"{source.description} (auto: {why})"

    def _announce(self, source: Source) -> None:
        """The one log line, at the first read (building twice, as the daemon does, logs nothing)."""
        if not self.announced:
            import logging  # run's settings read the table of sources: stay cheap

            self.announced = True
            logging.getLogger("tokenrelay").info(
                f"auto chose the {source.name} OIDC token source: {self.why}",
                extra={"source": source.name, "why": self.why},
            )

    @property
    def mints(self) -> bool:  # type: ignore[override]
        return self.chosen is not None and self.chosen.mints

    @property
    def fixed(self) -> bool:  # type: ignore[override]
        return self.chosen is not None and self.chosen.fixed

    async def read(self) -> IdToken:
        if self.chosen is not None:
            self._announce(self.chosen)
            return await self.chosen.read()
        import asyncio

        probed = [name for name in ORDER if PLATFORMS[name].probes]
        quick = dataclasses.replace(self.inputs, timeout=min(self.inputs.timeout, PROBE_TIMEOUT))
        lines, candidates = [], {}
        for name in probed:
            try:
                candidates[name] = PLATFORMS[name].build(quick)
            except ConfigError as exc:  # not this cloud here (AWS without a region, say): listed
                lines.append(f"{name}: {exc.message}")
        self.probed = tuple(secret for source in candidates.values() for secret in source.secrets())
        answers = await asyncio.gather(
            *(source.read() for source in candidates.values()), return_exceptions=True
        )
        for name, answer in zip(candidates, answers, strict=True):
            if isinstance(answer, IdToken):
                chosen = PLATFORMS[name].build(self.inputs)
                self._choose(f"{PLATFORMS[name].platform}'s metadata server answered", chosen)
                self._announce(chosen)
                return answer
            if isinstance(answer, IdTokenError | ConfigError):
                lines.append(f"{name}: {answer.message}")
            elif isinstance(answer, BaseException):
                raise answer
        raise IdTokenError(
            "--id-token-source auto found no OIDC token: no token file (AZURE_FEDERATED_TOKEN_FILE, "
            "--id-token-file), no CI system's markers, and no metadata server handed one out ("
            + "; ".join(lines)
            + ")"
        )

    def choice(self) -> tuple[Source, str | None]:
        return (self.chosen, f"auto: {self.why}") if self.chosen is not None else (self, None)

    def secrets(self) -> tuple[str, ...]:
        return self.chosen.secrets() if self.chosen is not None else self.probed

    def fix(self) -> str:
        return self.chosen.fix() if self.chosen is not None else self.setup

    def renewal(self) -> str:
        return self.chosen.renewal() if self.chosen is not None else super(AutoSource, self).renewal()

    def horizon(self, now: float) -> float:
        return self.chosen.horizon(now) if self.chosen is not None else super(AutoSource, self).horizon(now)

    def shortfall(self, expiry: float | None, now: float) -> str | None:
        return self.chosen.shortfall(expiry, now) if self.chosen is not None else None
