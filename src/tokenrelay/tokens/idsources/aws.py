"""AWS: STS ``GetWebIdentityToken`` (IAM outbound identity federation) mints a JWT for our audience at
every exchange.

The call is signed (SigV4) with the credentials of the standard chain, in the SDKs' order, read from
the environment tokenrelay was given: access keys (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``); a web identity token file (``AWS_WEB_IDENTITY_TOKEN_FILE`` with
``AWS_ROLE_ARN``: EKS's IAM roles for service accounts); the container endpoint
(``AWS_CONTAINER_CREDENTIALS_FULL_URI`` with ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``, as EKS Pod
Identity and ECS set them); IMDSv2. GetWebIdentityToken has no global endpoint: the region is
``AWS_REGION``, else ``AWS_DEFAULT_REGION``; ``AWS_ENDPOINT_URL_STS``, else ``AWS_ENDPOINT_URL``,
replaces the regional endpoint, as the SDKs honour them.

botocore (the SDK's own credential providers, SigV4 and error parsing: made for exactly this) is
imported by this module only, at the first read, and is an extra: ``pip install 'tokenrelay[aws]'``
(1.41.0 is the first whose STS model has GetWebIdentityToken). Its calls block, so they run in a
thread, each bounded (one attempt, connect and read timeouts; a metadata server's connect within
``METADATA_CONNECT_TIMEOUT``), and the whole read by the exchange timeout.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError, IdTokenError
from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT
from .base import METADATA_CONNECT_TIMEOUT, IdToken, Source, SourceInputs, checked
from .httpfetch import platform_words

REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL")
IGNORE_ENDPOINTS = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"
# What the platforms set in a workload that has an IAM role: auto chooses aws on these alone.
MARKERS = {
    "AWS_CONTAINER_CREDENTIALS_FULL_URI": "EKS Pod Identity or ECS",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "ECS",
    "AWS_WEB_IDENTITY_TOKEN_FILE": "EKS IAM roles for service accounts",
}
# botocore's names for the web identity settings, and the variables that give them
WEB_IDENTITY = {
    "web_identity_token_file": "AWS_WEB_IDENTITY_TOKEN_FILE",
    "role_arn": "AWS_ROLE_ARN",
    "role_session_name": "AWS_ROLE_SESSION_NAME",
}
# What signs or authorises the calls to AWS: never shown, whatever an endpoint quotes back.
SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN")
# The container endpoint's authorization token: in a file (EKS Pod Identity), else the variable (ECS).
TOKEN_FILE = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
TOKEN_VARIABLE = "AWS_CONTAINER_AUTHORIZATION_TOKEN"
MAX_TOKEN_FILE = 64 * 1024  # a service account token is a few KiB
# RS256 is the one every OIDC verifier takes; ES384 is the other that AWS offers.
SIGNING_ALGORITHM = "RS256"
CHAIN = (
    "access keys (AWS_ACCESS_KEY_ID), AWS_WEB_IDENTITY_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_FULL_URI, IMDSv2"
)


@dataclass(slots=True)
class AwsSource(Source):
    """STS GetWebIdentityToken, signed with the standard credential chain's credentials."""

    name = "aws"
    platform = "AWS"
    mints = True
    probes = True
    needs = ("botocore", "botocore", "aws")
    setup = (
        "give the workload an IAM role allowed sts:GetWebIdentityToken (EKS Pod Identity, IRSA, an ECS "
        "task role, an instance profile), enable outbound identity federation, and set AWS_REGION"
    )

    environ: Mapping[str, str] = field(repr=False)
    audience: str
    region: str
    endpoint: str | None  # the STS endpoint override; None: the region's own endpoint
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    connect_timeout: float = METADATA_CONNECT_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = ""
    client: Any = field(default=None, repr=False)  # botocore's STS client, kept once it has credentials

    def __post_init__(self) -> None:
        where = f" at {self.endpoint}" if self.endpoint else ""
        self.description = f"AWS STS GetWebIdentityToken in {self.region}{where}"

    @classmethod
    def build(cls, inputs: SourceInputs) -> AwsSource:
        cls.require()
        env = inputs.environ
        region = next((env[name] for name in REGION_VARIABLES if env.get(name)), None)
        if region is None:
            raise ConfigError(
                "the aws OIDC token source needs the region: set AWS_REGION (GetWebIdentityToken has no "
                "global endpoint)"
            )
        endpoint = None
        if env.get(IGNORE_ENDPOINTS, "").lower() != "true":
            endpoint = next((env[name] for name in ENDPOINT_VARIABLES if env.get(name)), None)
        return cls(
            env, inputs.audience, region, endpoint, inputs.timeout, inputs.connect_timeout, inputs.wall
        )

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        for variable, platform in MARKERS.items():
            if environ.get(variable):
                return f"{variable} is set ({platform})"
        return None

    async def read(self) -> IdToken:
        import asyncio

        try:
            # the thread's own calls are bounded too: a cancelled wait leaves it to finish soon.
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel that lands as STS
            # answers, and hands on the token instead
            async with asyncio.timeout(self.timeout):
                token = await asyncio.to_thread(self._mint)
        except TimeoutError:
            raise IdTokenError(f"{self.description} did not answer within {self.timeout:g}s") from None
        return checked(token, self.description, self.wall)

    def _mint(self) -> str:
        """The token, from STS (blocking: runs in a thread)."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            client = self.client or self._new_client()
            answer = client.get_web_identity_token(
                Audience=[self.audience], SigningAlgorithm=SIGNING_ALGORITHM
            )
        except NoCredentialsError:
            raise IdTokenError(f"{self.description}: no AWS credentials found") from None
        except ClientError as exc:
            error = exc.response.get("Error", {})
            words = platform_words(f"{error.get('Code', '')}: {error.get('Message', '')}".encode())
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
            raise IdTokenError(f"{self.description} answered HTTP {status}: {words}") from None
        except BotoCoreError as exc:  # no connection, a timeout, a credential provider's failure
            raise IdTokenError(f"{self.description}: {platform_words(str(exc).encode())}") from None
        except ValueError as exc:  # botocore's refusal of the endpoint URL, or of the container token
            words = platform_words(str(exc).encode())
            raise IdTokenError(f"{self.description}: {words} ({self._value_error_hint(str(exc))})") from None
        self.client = client
        token = answer.get("WebIdentityToken")
        if not isinstance(token, str):
            raise IdTokenError(f'{self.description} answered without a "WebIdentityToken"')
        return token

    def _value_error_hint(self, text: str) -> str:
        if "auth token" not in text.lower():
            return f"check {', '.join(ENDPOINT_VARIABLES)}"
        if self.environ.get(TOKEN_FILE):
            return f"{TOKEN_FILE} names {self.environ[TOKEN_FILE]}, whose token has a line break inside"
        return f"{TOKEN_VARIABLE} holds a line break: set it to the token alone"

    def _new_client(self) -> Any:
        """botocore's STS client, its credentials from the chain read in ``environ``."""
        import logging

        import botocore.session
        from botocore import credentials
        from botocore.config import Config
        from botocore.utils import ContainerMetadataFetcher, InstanceMetadataFetcher

        class _OnceFetcher(ContainerMetadataFetcher):  # type: ignore[misc]
            RETRY_ATTEMPTS = 1  # of botocore's 3, one second apart: a read fails in its 2s timeout

        # botocore's debug lines carry signed headers and whole answers, the token among them: at
        # tokenrelay's --log-level debug they would print it
        logging.getLogger("botocore").setLevel(logging.WARNING)
        env = dict(self.environ)
        session = botocore.session.Session()
        bounds = Config(
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
            retries={"total_max_attempts": 1},
            user_agent_appid="tokenrelay",
        )

        def sts(service: str, **more: Any) -> Any:  # AssumeRoleWithWebIdentity, at the same endpoint
            more["config"] = bounds.merge(more["config"]) if "config" in more else bounds
            return session.create_client(service, region_name=self.region, endpoint_url=self.endpoint, **more)

        web_identity = {key: env[name] for key, name in WEB_IDENTITY.items() if env.get(name)}
        imds = {
            "ec2_metadata_service_endpoint": env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT"),
            "ec2_metadata_service_endpoint_mode": env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "ipv4"),
            "ec2_metadata_v1_disabled": env.get("AWS_EC2_METADATA_V1_DISABLED", "").lower() == "true",
        }
        # botocore's own providers in the SDKs' order, each reading ``env`` rather than os.environ
        chain = credentials.CredentialResolver(
            [
                credentials.EnvProvider(environ=env),
                credentials.AssumeRoleWithWebIdentityProvider(
                    load_config=lambda: {"profiles": {"default": web_identity}},
                    client_creator=sts,
                    profile_name="default",
                    cache={},
                    disable_env_vars=True,
                ),
                credentials.ContainerProvider(environ=ContainerEnviron(env), fetcher=_OnceFetcher()),
                credentials.InstanceMetadataProvider(
                    iam_role_fetcher=InstanceMetadataFetcher(
                        timeout=self.connect_timeout, num_attempts=1, env=env, config=imds
                    )
                ),
            ]
        )
        session.register_component("credential_provider", chain)
        return sts("sts")

    def secrets(self) -> tuple[str, ...]:
        said = tuple(self.environ.get(name, "") for name in SECRET_VARIABLES)
        if path := self.environ.get(TOKEN_FILE):
            # the token the file holds is sent as the variable's would be: as secret
            with contextlib.suppress(IdTokenError):
                said += (_container_token(path),)
        return said

    def fix(self) -> str:
        return f"{self.setup}; credentials come from {CHAIN}"


class ContainerEnviron(Mapping[str, str]):
    """``environ`` as botocore's ContainerProvider reads it, with the token file read here instead:
    afresh at each credentials fetch (as botocore does: EKS rotates it), bounded, and without the
    line break ``echo TOKEN > FILE`` leaves at its end, which botocore refuses as a header value ("Auth
    token value is not a legal header value"). A header value cannot hold a line break, so dropping
    the trailing ones changes no token that could have worked; one inside is still refused."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = {name: value for name, value in environ.items() if name != TOKEN_FILE}
        self._file = environ.get(TOKEN_FILE) or None
        if self._file is not None:
            self._environ[TOKEN_VARIABLE] = ""  # read at each lookup: the file wins, as in botocore

    def __getitem__(self, name: str) -> str:
        if name == TOKEN_VARIABLE and self._file is not None:
            return _container_token(self._file)
        return self._environ[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._environ)

    def __len__(self) -> int:
        return len(self._environ)


def _container_token(path: str) -> str:
    """The token in ``path``, its trailing line breaks dropped; IdTokenError naming the variable."""
    from ...lite.regularfile import read_regular

    try:
        raw = read_regular(path, MAX_TOKEN_FILE)
    except OSError as exc:
        raise IdTokenError(f"cannot read {TOKEN_FILE} {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_TOKEN_FILE:
        raise IdTokenError(f"{TOKEN_FILE} {path} holds over {MAX_TOKEN_FILE // 1024} KiB: not a token")
    return raw.decode("utf-8", "replace").rstrip("\r\n")
