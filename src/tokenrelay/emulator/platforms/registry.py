"""The platforms the emulator plays: their token endpoints, issuers and claim shapes.

Each ``Platform`` mints tokens with that platform's real issuer, subject format and claims (the
sources are cited per row, and docs/emulator.md shows a token of each), signed with the emulator's
platform key. The emulator's token service verifies a played issuer against that key (unless the
issuer is listed with ``--trust-issuer``, when the real one is fetched), so an identity whose
``claimMatch`` names the real issuer and subject can be tried here before it is deployed.

The endpoints answer in each platform's own format, refusals included, because that is what the
sources read: GitHub Actions' request URL, Azure Pipelines' ``oidctoken``, the GCP metadata server,
Azure's IMDS and App Service identity endpoint, and the Buildkite agent API that
``tokenrelay emulate buildkite-agent`` calls (as does ``tokenrelay emulate circleci``). Loopback
callers only, like minting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..sts.issuer import Issuer
from ..sts.oidc import normalize
from . import aws

ORG_UUID = "8d3c7a2e-4f5b-4c1d-9e0a-2b6f1a7c9d30"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
PROJECT_NUMBER = "123456789012"
AWS_ISSUER_ID = "6f1c2a9e-0000-4b7d-8e3f-5a4b3c2d1e0f"  # the account's unique issuer host
AWS_ROLE = f"arn:aws:iam::{aws.ACCOUNT}:role/app"
AWS_NAMESPACE = "https://sts.amazonaws.com/"  # AWS's claims nest under this key
TRUST_DOMAIN = "example.org"
SPIFFE_ID = f"spiffe://{TRUST_DOMAIN}/ns/default/sa/app"  # the Kubernetes workload registrar's shape

PLATFORM_LIFETIME = 900.0  # seconds: GitHub's and Buildkite's tokens live minutes, not hours

Claims = Callable[[str], dict[str, Any]]  # audience -> the claims beyond iss, aud, iat, nbf, exp, jti


@dataclass(frozen=True, slots=True)
class Platform:
    """One platform the emulator plays."""

    name: str  # the --id-token-source that reads it
    issuer: str
    claims: Claims
    default_audience: str
    source: str  # where the claim shapes come from


def _github(audience: str) -> dict[str, Any]:
    return {
        "sub": "repo:acme/app:ref:refs/heads/main",
        "repository": "acme/app",
        "repository_owner": "acme",
        "repository_id": "690000001",
        "repository_owner_id": "1000001",
        "repository_visibility": "private",
        "ref": "refs/heads/main",
        "ref_type": "branch",
        "sha": "0c1f8e5e3b6a4d2f9c7b1a0e8d6c4b2a09f7e5d3",
        "workflow": "ci",
        "workflow_ref": "acme/app/.github/workflows/ci.yml@refs/heads/main",
        "job_workflow_ref": "acme/app/.github/workflows/ci.yml@refs/heads/main",
        "event_name": "push",
        "actor": "octocat",
        "actor_id": "583231",
        "run_id": "7000000001",
        "run_number": "42",
        "run_attempt": "1",
        "runner_environment": "github-hosted",
    }


def _gitlab(audience: str) -> dict[str, Any]:
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


def _buildkite(audience: str) -> dict[str, Any]:
    commit = "0c1f8e5e3b6a4d2f9c7b1a0e8d6c4b2a09f7e5d3"
    return {
        "sub": f"organization:acme:pipeline:app:ref:refs/heads/main:commit:{commit}:step:build",
        "organization_slug": "acme",
        "organization_id": ORG_UUID,
        "pipeline_slug": "app",
        "build_number": 42,
        "build_branch": "main",
        "build_commit": commit,
        "build_source": "webhook",
        "step_key": "build",
        "job_id": "0190f2c4-7a3e-4b8e-9d2c-5f1a6b7c8d9e",
        "agent_id": "0190f2c4-0000-4b8e-9d2c-5f1a6b7c8d9e",
        "runner_environment": "buildkite-hosted",
    }


def _circleci(audience: str) -> dict[str, Any]:
    project = "a1b2c3d4-0000-4e5f-8a9b-0c1d2e3f4a5b"
    return {
        "sub": f"org/{ORG_UUID}/project/{project}/user/b2c3d4e5-0000-4f5a-9b0c-1d2e3f4a5b6c",
        "oidc.circleci.com/project-id": project,
        "oidc.circleci.com/context-ids": [],
        "oidc.circleci.com/vcs-origin": "github.com/acme/app",
        "oidc.circleci.com/vcs-ref": "refs/heads/main",
    }


def _bitbucket(audience: str) -> dict[str, Any]:
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


def _azure_pipelines(audience: str) -> dict[str, Any]:
    return {"sub": "sc://acme/app/deploy"}


def _gcp(audience: str) -> dict[str, Any]:
    return {
        "sub": "109876543210987654321",
        "azp": "109876543210987654321",
        "email": f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com",
        "email_verified": True,
        "google": {
            "compute_engine": {
                "project_id": "acme-app",
                "project_number": int(PROJECT_NUMBER),
                "zone": "europe-west1-b",
                "instance_id": "4203012345678901234",
                "instance_name": "app-1",
            }
        },
    }


def _azure(audience: str) -> dict[str, Any]:
    principal = "9a8b7c6d-0000-4e5f-a1b2-c3d4e5f60718"
    return {
        "sub": principal,
        "oid": principal,
        "tid": TENANT,
        "appid": "0f1e2d3c-0000-4b5a-8c9d-e0f1a2b3c4d5",
        "appidacr": "2",
        "idp": f"https://sts.windows.net/{TENANT}/",
        "idtyp": "app",
        "ver": "1.0",
        "xms_mirid": "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/acme/providers/"
        "Microsoft.ManagedIdentity/userAssignedIdentities/app",
    }


def _aws(audience: str) -> dict[str, Any]:
    return {
        "sub": AWS_ROLE,
        AWS_NAMESPACE: {
            "aws_account": aws.ACCOUNT,
            "source_region": "us-east-1",
            "principal_id": AWS_ROLE,
            "org_id": "o-abc1234567",
            "ou_path": "o-abc1234567/r-ab12/ou-ab12-11111111/",
        },
    }


def _spiffe(audience: str) -> dict[str, Any]:
    return {"sub": SPIFFE_ID}


PLATFORMS: dict[str, Platform] = {
    platform.name: platform
    for platform in (
        Platform(
            "github-actions",
            "https://token.actions.githubusercontent.com",
            _github,
            "https://github.com/acme",
            "https://docs.github.com/en/actions/reference/security/oidc",
        ),
        Platform(
            "gitlab",
            "https://gitlab.com",
            _gitlab,
            "https://gitlab.com",
            "https://docs.gitlab.com/ci/secrets/id_token_authentication/",
        ),
        Platform(
            "buildkite",
            "https://agent.buildkite.com",
            _buildkite,
            "https://buildkite.com/acme",
            "https://buildkite.com/docs/agent/v3/cli-oidc",
        ),
        Platform(
            "circleci",
            f"https://oidc.circleci.com/org/{ORG_UUID}",
            _circleci,
            ORG_UUID,
            "https://circleci.com/docs/openid-connect-tokens/",
        ),
        Platform(
            "bitbucket",
            "https://api.bitbucket.org/2.0/workspaces/acme/pipelines-config/identity/oidc",
            _bitbucket,
            "ari:cloud:bitbucket::workspace/e4f5a6b7-0000-4c5d-8e9f-2a3b4c5d6e7f",
            "https://support.atlassian.com/bitbucket-cloud/docs/integrate-pipelines-with-resource-servers-using-oidc/",
        ),
        Platform(
            "azure-pipelines",
            f"https://vstoken.dev.azure.com/{ORG_UUID}",
            _azure_pipelines,
            "api://AzureADTokenExchange",
            "https://learn.microsoft.com/en-us/azure/devops/pipelines/release/troubleshoot-workload-identity",
        ),
        Platform(
            "gcp",
            "https://accounts.google.com",
            _gcp,
            "",
            "https://cloud.google.com/compute/docs/instances/verifying-instance-identity",
        ),
        Platform(
            "azure",
            f"https://sts.windows.net/{TENANT}/",
            _azure,
            "",
            "https://learn.microsoft.com/en-us/entra/identity-platform/access-token-claims-reference",
        ),
        Platform(
            "aws",
            f"https://{AWS_ISSUER_ID}.tokens.sts.global.api.aws",
            _aws,
            "",
            "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_providers_outbound_token_claims.html",
        ),
        Platform(
            "spiffe",
            f"https://oidc-discovery.{TRUST_DOMAIN}",
            _spiffe,
            "",
            "https://github.com/spiffe/spiffe/blob/main/standards/JWT-SVID.md",
        ),
    )
}
PLAYED_ISSUERS = frozenset(normalize(platform.issuer) for platform in PLATFORMS.values())


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
    """The platforms' token endpoints, minting through ``issuer``."""

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
        def guarded(handler: Callable[[web.Request], Any]) -> Callable[[web.Request], Any]:
            async def serve(request: web.Request) -> web.StreamResponse:
                guard(request, "the platform endpoints are")
                answer: web.StreamResponse = await handler(request)
                return answer

            return serve

        routes = app.router
        routes.add_get("/platforms/github-actions/token", guarded(self._github))
        routes.add_post("/platforms/azure-pipelines/oidctoken", guarded(self._azure_pipelines))
        routes.add_get("/computeMetadata/v1/instance/service-accounts/default/identity", guarded(self._gcp))
        routes.add_get("/metadata/identity/oauth2/token", guarded(self._imds))
        routes.add_get("/platforms/azure/msi/token", guarded(self._app_service))
        routes.add_post("/platforms/buildkite/v3/jobs/{job}/oidc/tokens", guarded(self._buildkite))
        routes.add_post("/platforms/circleci/oidc", guarded(self._circleci))
        routes.add_post(aws.STS_PATH, guarded(self.aws.sts))
        routes.add_get(aws.CREDENTIALS_PATH, guarded(self.aws.credentials))
        routes.add_put(aws.IMDS_TOKEN_PATH, guarded(self.aws.imds_token))
        routes.add_get(aws.IMDS_ROLES_PATH, guarded(self.aws.imds_credentials))
        routes.add_get(aws.IMDS_ROLES_PATH + "{role}", guarded(self.aws.imds_credentials))

    def _mint(self, name: str, audience: str | None) -> str:
        self.calls[name] = self.calls.get(name, 0) + 1
        return mint(self._issuer, name, audience, self._lifetime())

    def _mint_aws(self, audience: str, lifetime: float, region: str) -> str:
        self.calls["aws"] = self.calls.get("aws", 0) + 1
        claims = _aws(audience)[AWS_NAMESPACE]
        return mint(
            self._issuer, "aws", audience, lifetime, {AWS_NAMESPACE: {**claims, "source_region": region}}
        )

    def mint_spiffe(self, audience: str) -> str:
        """A JWT-SVID for ``audience``, for the Workload API socket (workloadapi.py)."""
        return self._mint("spiffe", audience)

    async def _github(self, request: web.Request) -> web.Response:
        # actions/toolkit's getIDToken: GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=AUD, bearer token
        if not _bearer(request):
            return web.json_response({"message": "Unable to authorize request"}, status=401)
        token = self._mint("github-actions", request.query.get("audience"))
        return web.json_response({"count": len(token), "value": token})

    async def _azure_pipelines(self, request: web.Request) -> web.Response:
        if not _bearer(request):
            return web.json_response(
                {"message": "TF400813: The user is not authorized to access this resource."}, status=401
            )
        if request.query.get("api-version") is None:
            return web.json_response(
                {"message": "No api-version was supplied for the POST request."}, status=400
            )
        if not request.query.get("serviceConnectionId"):
            return web.json_response(
                {"message": "The service connection does not exist or has not been authorized for use."},
                status=400,
            )
        # its audience is fixed: Entra ID's token exchange
        return web.json_response({"oidcToken": self._mint("azure-pipelines", None)})

    async def _gcp(self, request: web.Request) -> web.Response:
        if request.headers.get("Metadata-Flavor") != "Google":
            return web.Response(text="Missing Metadata-Flavor:Google header.", status=403)
        audience = request.query.get("audience")
        if not audience:
            return web.Response(text="non-empty audience parameter required", status=400)
        token = self._mint("gcp", audience)
        return web.Response(text=token, headers={"Metadata-Flavor": "Google"})

    async def _imds(self, request: web.Request) -> web.Response:
        if request.headers.get("Metadata") != "true":
            return _azure_error("invalid_request", "Required metadata header not specified", 400)
        return self._azure_token(request)

    async def _app_service(self, request: web.Request) -> web.Response:
        if not request.headers.get("X-IDENTITY-HEADER"):
            return _azure_error("invalid_request", "X-IDENTITY-HEADER is missing", 400)
        return self._azure_token(request)

    def _azure_token(self, request: web.Request) -> web.Response:
        resource = request.query.get("resource")
        if not request.query.get("api-version"):
            return _azure_error("invalid_request", "Required query variable 'api-version' is missing", 400)
        if not resource:
            return _azure_error("invalid_resource", "AADSTS500011: The resource principal was not found", 400)
        token = self._mint("azure", resource)
        now = int(self._wall())
        return web.json_response(
            {
                "access_token": token,
                "expires_in": str(int(self._lifetime())),
                "expires_on": str(now + int(self._lifetime())),
                "not_before": str(now),
                "resource": resource,
                "token_type": "Bearer",
            }
        )

    async def _buildkite(self, request: web.Request) -> web.Response:
        # the agent API behind `buildkite-agent oidc request-token`: Authorization: Token ACCESS_TOKEN
        if not request.headers.get("Authorization", "").startswith("Token "):
            return web.json_response({"message": "Unauthorized"}, status=401)
        body = await _json(request)
        audience = body.get("audience") if isinstance(body.get("audience"), str) else None
        return web.json_response({"token": self._mint("buildkite", audience)}, status=201)

    async def _circleci(self, request: web.Request) -> web.Response:
        body = await _json(request)
        claims = body.get("claims")
        audience = claims.get("aud") if isinstance(claims, dict) else None
        return web.json_response(
            {"token": self._mint("circleci", audience if isinstance(audience, str) else None)}
        )


def _bearer(request: web.Request) -> str:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _azure_error(error: str, description: str, status: int) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=status)


async def _json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
