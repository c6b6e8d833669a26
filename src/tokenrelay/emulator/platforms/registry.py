"""The one table of the platforms the emulator plays, and the endpoints they answer at.

Each ``Platform`` mints tokens with that platform's real issuer, subject format and claims (the
sources are cited per row, and docs/emulator.md shows a token of each), signed with the emulator's
platform key. The emulator's token service verifies a played issuer against that key (unless the
issuer is listed with ``--trust-issuer``, when the real one is fetched), so an identity whose
``claimMatch`` names the real issuer and subject can be tried here before it is deployed.

The endpoints answer in each platform's own format, refusals included, because that is what the
sources read: GitHub Actions' request URL, Azure Pipelines' ``oidctoken``, the GCP metadata server,
Azure's IMDS and App Service identity endpoint, the Buildkite agent API that
``tokenrelay emulate buildkite-agent`` calls (as does ``tokenrelay emulate circleci``), and AWS's
STS, container credentials and IMDSv2. Loopback callers only, like minting.

Adding a platform is its module (its ``PLATFORM``, and ``routes`` if it has an endpoint), one row
here, and its name in ``cli.PLATFORM_NAMES``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from ..sts.issuer import Issuer
from ..sts.oidc import normalize
from . import aws, azure, azurepipelines, bitbucket, buildkite, circleci, gcp, github, gitlab, spiffe
from .base import PLATFORM_LIFETIME, Handler, Minter, Platform, Route

PLATFORMS: dict[str, Platform] = {
    module.PLATFORM.name: module.PLATFORM
    for module in (github, gitlab, buildkite, circleci, bitbucket, azurepipelines, gcp, azure, aws, spiffe)
}
PLAYED_ISSUERS = frozenset(normalize(platform.issuer) for platform in PLATFORMS.values())
# the platforms with an HTTP token endpoint (AWS's are its AwsSts'): each one's routes
ENDPOINTS: tuple[Callable[[Minter], list[Route]], ...] = (
    github.routes,
    azurepipelines.routes,
    gcp.routes,
    azure.routes,
    buildkite.routes,
    circleci.routes,
)


def mint(
    issuer: Issuer,
    name: str,
    audience: str | None,
    lifetime: float = PLATFORM_LIFETIME,
    more: Mapping[str, Any] | None = None,
) -> str:
    """A token as platform ``name`` would mint it for ``audience`` (its default audience if None),
    with the claims ``more`` replacing the platform's own."""
    platform = PLATFORMS[name]
    aud = audience or platform.default_audience
    claims = {**platform.claims(aud), **(more or {})}
    return issuer.mint(claims.pop("sub"), aud, lifetime, {"iss": platform.issuer, **claims})


class PlatformEndpoints:
    """The platforms' token endpoints, minting through ``issuer`` (the ``Minter`` they are given)."""

    def __init__(
        self,
        issuer: Issuer,
        lifetime: Callable[[], float] = lambda: PLATFORM_LIFETIME,
        wall: Callable[[], float] = time.time,
        verify: aws.Verify = aws.unverifiable,  # for STS's AssumeRoleWithWebIdentity
    ) -> None:
        self._issuer = issuer
        self._lifetime = lifetime
        self._wall = wall
        self.calls: dict[str, int] = {}  # platform -> tokens minted, for tests and the curious
        self.aws = aws.AwsSts(self._mint_aws, verify, wall)

    def add_routes(self, app: web.Application, guard: Callable[[web.Request, str], None]) -> None:
        def guarded(handler: Handler) -> Handler:
            async def serve(request: web.Request) -> web.StreamResponse:
                guard(request, "the platform endpoints are")
                return await handler(request)

            return serve

        routes = [route for endpoints in ENDPOINTS for route in endpoints(self)] + self.aws.routes()
        for method, path, handler in routes:
            if method == "GET":
                app.router.add_get(path, guarded(handler))  # which answers HEAD too
            else:
                app.router.add_route(method, path, guarded(handler))

    def mint(self, name: str, audience: str | None) -> str:
        self.calls[name] = self.calls.get(name, 0) + 1
        return mint(self._issuer, name, audience, self._lifetime())

    def lifetime(self) -> float:
        return self._lifetime()

    def wall(self) -> float:
        return self._wall()

    def _mint_aws(self, audience: str, lifetime: float, region: str) -> str:
        self.calls["aws"] = self.calls.get("aws", 0) + 1
        claims = aws.claims(audience)[aws.AWS_NAMESPACE]
        return mint(
            self._issuer, "aws", audience, lifetime, {aws.AWS_NAMESPACE: {**claims, "source_region": region}}
        )

    def mint_spiffe(self, audience: str) -> str:
        """A JWT-SVID for ``audience``, for the Workload API socket (``spiffe.WorkloadApi``)."""
        return self.mint("spiffe", audience)
