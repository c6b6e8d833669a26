"""AWS as the emulator plays it for the aws source: STS ``GetWebIdentityToken`` and container credentials.

Its tokens carry AWS's issuer (the account's own issuer host) and claims, nested under
``AWS_NAMESPACE``, as IAM outbound identity federation mints them.

STS (``POST /platforms/aws/sts``, the Query API): a form of ``Action=GetWebIdentityToken``,
``Version=2011-06-15``, ``Audience.member.N`` (1-10), ``SigningAlgorithm`` (``RS256`` or ``ES384``) and
optionally ``DurationSeconds`` (60-3600, default 300), as botocore's STS model (``sts/2011-06-15/
service-2.json``) serializes it. The request must carry a valid SigV4 signature (``sigv4``) by the
test credentials (``TEST_ACCESS_KEY``/``TEST_SECRET_KEY``, which ``tokenrelay emulate`` prints) or by
temporary credentials the container endpoint handed out, with their session token. The answer is STS's
``GetWebIdentityTokenResponse`` XML (``WebIdentityToken``, ``Expiration``); a refusal is its
``ErrorResponse`` XML with AWS's own code and words (``SignatureDoesNotMatch``, ``InvalidClientTokenId``,
``ValidationError``...), which botocore turns into the ``ClientError`` the source quotes.

Container credentials (``GET /platforms/aws/credentials``): what EKS Pod Identity's agent and ECS
answer at ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` to a request whose ``Authorization`` is the token of
``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (any non-empty value here): temporary credentials as JSON.

``AssumeRoleWithWebIdentity`` at the same path (unsigned, as IRSA's SDKs send it): a web identity
token that verifies as the token service verifies (the emulator's issuer, a played one, or a
``--trust-issuer``) for temporary credentials; a token that does not is ``InvalidIdentityToken``.

IMDSv2 at its real paths (point ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` at the emulator): ``PUT
/latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds`` gives a session token, which
``GET /latest/meta-data/iam/security-credentials/[ROLE]`` requires (IMDSv1's token-less reads are
refused, as on an instance that requires IMDSv2): the instance profile's role, then its credentials.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from aiohttp import web

from ..errors import ApiError
from . import sigv4
from .base import Platform, Route

STS_PATH = "/platforms/aws/sts"
CREDENTIALS_PATH = "/platforms/aws/credentials"
# AWS's documented example key pair: recognisably not real, and what `tokenrelay emulate` prints
TEST_ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
TEST_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ACCOUNT = "123456789012"
XMLNS = "https://sts.amazonaws.com/doc/2011-06-15/"
VERSION = "2011-06-15"
ALGORITHMS = ("RS256", "ES384")
DEFAULT_DURATION, MIN_DURATION, MAX_DURATION = 300, 60, 3600
CREDENTIALS_LIFETIME = 6 * 3600.0  # EKS Pod Identity's credentials live hours; the SDK refreshes them
IMDS_TOKEN_PATH = "/latest/api/token"
IMDS_ROLES_PATH = "/latest/meta-data/iam/security-credentials/"
INSTANCE_ROLE = "app"  # the instance profile's role name

ISSUER_ID = "6f1c2a9e-0000-4b7d-8e3f-5a4b3c2d1e0f"  # the account's unique issuer host
AWS_ROLE = f"arn:aws:iam::{ACCOUNT}:role/app"
AWS_NAMESPACE = "https://sts.amazonaws.com/"  # AWS's claims nest under this key


def claims(audience: str) -> dict[str, Any]:
    return {
        "sub": AWS_ROLE,
        AWS_NAMESPACE: {
            "aws_account": ACCOUNT,
            "source_region": "us-east-1",
            "principal_id": AWS_ROLE,
            "org_id": "o-abc1234567",
            "ou_path": "o-abc1234567/r-ab12/ou-ab12-11111111/",
        },
    }


PLATFORM = Platform(
    "aws",
    f"https://{ISSUER_ID}.tokens.sts.global.api.aws",
    claims,
    "",
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_providers_outbound_token_claims.html",
)

# audience, lifetime, the region signed for -> a token as AWS STS mints it
Mint = Callable[[str, float, str], str]
Verify = Callable[[str], Awaitable[dict[str, Any]]]  # an OIDC token -> its verified claims, or ApiError


async def unverifiable(token: str) -> dict[str, Any]:
    """The verifier of endpoints served without the token service: no web identity token verifies."""
    from ...lite.aip193 import Code

    raise ApiError(Code.UNAUTHENTICATED, "Couldn't retrieve verification key from your identity provider")


class AwsSts:
    """STS's GetWebIdentityToken and the container credentials endpoint, minting through ``mint``."""

    def __init__(self, mint: Mint, verify: Verify, wall: Callable[[], float] = time.time) -> None:
        self._mint = mint
        self._verify = verify
        self._wall = wall
        self._secrets = {TEST_ACCESS_KEY: TEST_SECRET_KEY}
        self._sessions: dict[str, str] = {}  # temporary access key -> its session token
        self._imds_tokens: set[str] = set()

    def routes(self) -> list[Route]:
        return [
            ("POST", STS_PATH, self.sts),
            ("GET", CREDENTIALS_PATH, self.credentials),
            ("PUT", IMDS_TOKEN_PATH, self.imds_token),
            ("GET", IMDS_ROLES_PATH, self.imds_credentials),
            ("GET", IMDS_ROLES_PATH + "{role}", self.imds_credentials),
        ]

    async def sts(self, request: web.Request) -> web.Response:
        body = await request.read()
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if form.get("Action") == "AssumeRoleWithWebIdentity":  # unsigned: the token is the credential
            return await self._assume_role_with_web_identity(form)
        try:
            signed = sigv4.verify(
                request.method, request.path, request.query_string, request.headers, body, self._secrets
            )
            if signed.service != "sts":
                raise sigv4.Refusal(
                    "SignatureDoesNotMatch", "Credential should be scoped to correct service: 'sts'. "
                )
            expected_token = self._sessions.get(signed.access_key)
            if expected_token is not None and signed.session_token != expected_token:
                raise sigv4.Refusal(
                    "InvalidClientTokenId", "The security token included in the request is invalid."
                )
            audiences, lifetime = _web_identity_request(form)
        except sigv4.Refusal as refused:
            return _error(refused)
        token = self._mint(audiences[0], lifetime, signed.region)
        expiration = datetime.fromtimestamp(self._wall() + lifetime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return _xml(
            f'<GetWebIdentityTokenResponse xmlns="{XMLNS}">'
            "<GetWebIdentityTokenResult>"
            f"<WebIdentityToken>{token}</WebIdentityToken><Expiration>{expiration}</Expiration>"
            "</GetWebIdentityTokenResult>"
            f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
            "</GetWebIdentityTokenResponse>",
            200,
        )

    async def _assume_role_with_web_identity(self, form: dict[str, str]) -> web.Response:
        """IRSA's exchange: a Kubernetes service-account token (AWS_WEB_IDENTITY_TOKEN_FILE) for the
        role's temporary credentials. The token must verify as the emulator's token service verifies."""
        role, session = form.get("RoleArn", ""), form.get("RoleSessionName", "")
        if not role or not session:
            missing = "roleArn" if not role else "roleSessionName"
            return _error(
                sigv4.Refusal(
                    "ValidationError",
                    f"1 validation error detected: Value null at '{missing}' failed to satisfy constraint: "
                    "Member must not be null",
                    400,
                )
            )
        try:
            claims = await self._verify(form.get("WebIdentityToken", ""))
        except ApiError as exc:
            return _error(sigv4.Refusal("InvalidIdentityToken", exc.message, 400))
        credentials = self._issue()
        name = role.rpartition("/")[2]
        return _xml(
            f'<AssumeRoleWithWebIdentityResponse xmlns="{XMLNS}"><AssumeRoleWithWebIdentityResult>'
            f"<SubjectFromWebIdentityToken>{escape(str(claims.get('sub', '')))}</SubjectFromWebIdentityToken>"
            f"<AssumedRoleUser><Arn>arn:aws:sts::{ACCOUNT}:assumed-role/{escape(name)}/{escape(session)}</Arn>"
            f"<AssumedRoleId>AROAEMULATOR:{escape(session)}</AssumedRoleId></AssumedRoleUser>"
            "<Credentials>"
            + "".join(f"<{key}>{escape(value)}</{key}>" for key, value in credentials.items())
            .replace("<Token>", "<SessionToken>")
            .replace("</Token>", "</SessionToken>")
            + f"</Credentials><Provider>{escape(str(claims.get('iss', '')))}</Provider>"
            "</AssumeRoleWithWebIdentityResult>"
            f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
            "</AssumeRoleWithWebIdentityResponse>",
            200,
        )

    async def credentials(self, request: web.Request) -> web.Response:
        if not request.headers.get("Authorization", "").strip():
            return web.json_response(
                {"code": "AccessDeniedException", "message": "Authorization header is missing"}, status=400
            )
        return web.json_response({**self._issue(), "AccountId": ACCOUNT})

    async def imds_token(self, request: web.Request) -> web.Response:
        ttl = request.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return web.Response(status=400, text="Bad Request")
        token = secrets.token_urlsafe(40)
        self._imds_tokens.add(token)
        return web.Response(text=token, headers={"X-aws-ec2-metadata-token-ttl-seconds": ttl})

    async def imds_credentials(self, request: web.Request) -> web.Response:
        if request.headers.get("X-aws-ec2-metadata-token") not in self._imds_tokens:
            return web.Response(status=401, text="Unauthorized")
        role = request.match_info.get("role", "")
        if not role:
            return web.Response(text=INSTANCE_ROLE)
        if role != INSTANCE_ROLE:
            return web.Response(status=404, text="Not Found")
        now = datetime.fromtimestamp(self._wall(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return web.json_response({"Code": "Success", "LastUpdated": now, "Type": "AWS-HMAC", **self._issue()})

    def _issue(self) -> dict[str, str]:
        """New temporary credentials that STS accepts, with their session token."""
        access_key = "ASIA" + secrets.token_hex(8).upper()
        secret = secrets.token_urlsafe(30)
        self._secrets[access_key] = secret
        self._sessions[access_key] = secrets.token_urlsafe(48)
        expiration = datetime.fromtimestamp(self._wall() + CREDENTIALS_LIFETIME, UTC)
        return {
            "AccessKeyId": access_key,
            "SecretAccessKey": secret,
            "Token": self._sessions[access_key],
            "Expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }


def _web_identity_request(form: dict[str, str]) -> tuple[list[str], float]:
    """The audiences and lifetime asked for; Refusal in STS's words when the form is not valid."""
    action = form.get("Action", "")
    if action != "GetWebIdentityToken":
        raise sigv4.Refusal("InvalidAction", f"Could not find operation {action} for version {VERSION}", 400)
    audiences = [
        form[name]
        for name in sorted(
            (name for name in form if name.startswith("Audience.member.")),
            key=lambda name: int(name.rpartition(".")[2]) if name.rpartition(".")[2].isdigit() else 0,
        )
    ]
    problems = []
    if not audiences:
        problems.append("Value null at 'audience' failed to satisfy constraint: Member must not be null")
    elif len(audiences) > 10:
        problems.append(
            "Value at 'audience' failed to satisfy constraint: "
            "Member must have length less than or equal to 10"
        )
    algorithm = form.get("SigningAlgorithm")
    if algorithm not in ALGORITHMS:
        problems.append(
            f"Value '{algorithm}' at 'signingAlgorithm' failed to satisfy constraint: Member must satisfy "
            f"enum value set: [{', '.join(ALGORITHMS)}]"
        )
    duration = form.get("DurationSeconds", str(DEFAULT_DURATION))
    if not duration.isdigit() or not MIN_DURATION <= int(duration) <= MAX_DURATION:
        problems.append(
            f"Value '{duration}' at 'durationSeconds' failed to satisfy constraint: Member must have value "
            f"between {MIN_DURATION} and {MAX_DURATION}"
        )
    if problems:
        count = f"{len(problems)} validation error{'s' if len(problems) > 1 else ''} detected: "
        raise sigv4.Refusal("ValidationError", count + "; ".join(problems), 400)
    return audiences, float(duration)


def _error(refused: sigv4.Refusal) -> web.Response:
    kind = "Receiver" if refused.status >= 500 else "Sender"
    return _xml(
        f'<ErrorResponse xmlns="{XMLNS}"><Error><Type>{kind}</Type><Code>{refused.code}</Code>'
        f"<Message>{escape(refused.message)}</Message></Error>"
        f"<RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>",
        refused.status,
    )


def _xml(text: str, status: int) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/xml")
