"""The aws and spiffe sources against the emulator's STS and Workload API: the credential chain, the
endpoint overrides, the platforms' own refusals, bounded silence, and imports only when chosen."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tokenrelay.emulator import Emulator
from tokenrelay.emulator.platforms import aws as awssts
from tokenrelay.emulator.platforms.aws import AWS_NAMESPACE, AWS_ROLE
from tokenrelay.emulator.platforms.spiffe import SPIFFE_ID
from tokenrelay.errors import ConfigError, IdTokenError
from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.tokens.idsources import SOURCES, Source, SourceInputs, explained, workload_pb2
from tokenrelay.tokens.idsources.auto import AutoSource

from ..support.platforms import environment, spiffe_socket

CLOSED = "http://127.0.0.1:9"  # nothing listens: refused at once


def build(name: str, env: dict[str, str], audience: str, **more: object) -> Source:
    return SOURCES[name].build(SourceInputs(environ=env, audience=audience, **more))  # type: ignore[arg-type]


def aws_env(emulator: Emulator, **changes: str) -> dict[str, str]:
    # IMDS closed: off EC2 the chain ends there at once
    env = {**environment("aws", emulator), "AWS_EC2_METADATA_SERVICE_ENDPOINT": CLOSED, **changes}
    return {name: value for name, value in env.items() if value}


async def test_aws_mints_afresh_at_every_read_with_awss_claims(emulator: Emulator) -> None:
    """Each read is one GetWebIdentityToken for the audience: AWS's issuer, the role ARN as subject,
    the signing region in AWS's own claims."""
    source = build("aws", aws_env(emulator), "https://auth.example.com")
    first, second = await source.read(), await source.read()
    assert first.value != second.value and emulator.platforms.calls["aws"] == 2
    claims = unverified_claims(first.value)
    assert claims is not None
    assert claims["sub"] == AWS_ROLE and claims["aud"] == "https://auth.example.com"
    assert claims["iss"].endswith(".tokens.sts.global.api.aws")
    assert claims[AWS_NAMESPACE]["source_region"] == "eu-west-1"
    assert first.expiry == claims["exp"]


async def test_aws_signs_with_eks_pod_identitys_container_credentials(
    emulator: Emulator, tmp_path: Path
) -> None:
    """With no keys in the environment, the container endpoint and its token file (as EKS Pod Identity
    sets them) give temporary credentials, whose session token STS then checks."""
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text("pod-identity-token")
    env = aws_env(
        emulator,
        AWS_ACCESS_KEY_ID="",
        AWS_SECRET_ACCESS_KEY="",
        AWS_CONTAINER_CREDENTIALS_FULL_URI=emulator.base_url + awssts.CREDENTIALS_PATH,
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
    )
    token = await build("aws", env, "https://auth.example.com").read()
    assert unverified_claims(token.value) is not None
    # the temporary key without its session token is refused by STS, in STS's words
    issued = next(key for key in emulator.platforms.aws._sessions)
    secret = emulator.platforms.aws._secrets[issued]
    bare = aws_env(emulator, AWS_ACCESS_KEY_ID=issued, AWS_SECRET_ACCESS_KEY=secret)
    with pytest.raises(IdTokenError, match="answered HTTP 403: InvalidClientTokenId: The security token"):
        await build("aws", bare, "https://auth.example.com").read()


def pod_identity_env(emulator: Emulator, token_file: Path) -> dict[str, str]:
    return aws_env(
        emulator,
        AWS_ACCESS_KEY_ID="",
        AWS_SECRET_ACCESS_KEY="",
        AWS_CONTAINER_CREDENTIALS_FULL_URI=emulator.base_url + awssts.CREDENTIALS_PATH,
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
    )


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\n\n"], ids=["lf", "crlf", "blank-line"])
async def test_a_container_token_file_ending_in_a_line_break_still_signs(
    emulator: Emulator, tmp_path: Path, ending: str
) -> None:
    """A container authorization token file written with `echo TOKEN > FILE` (its line break at the
    end, which botocore refuses as a header value) gives credentials, the token sent without it."""
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text("pod-identity-token" + ending)
    token = await build("aws", pod_identity_env(emulator, token_file), "https://auth.example.com").read()
    assert unverified_claims(token.value) is not None
    assert emulator.platforms.aws._sessions  # the container endpoint's temporary credentials were used


async def test_a_container_token_with_a_line_break_inside_names_the_file(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A token file with a line break inside (no header can carry it) fails naming
    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE and the file, not the STS endpoint variables."""
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text("secret-half\nother-half\n")
    source = build("aws", pod_identity_env(emulator, token_file), "https://auth.example.com")
    with pytest.raises(IdTokenError) as caught:
        await source.read()
    message = str(caught.value)
    assert f"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names {token_file}" in message
    assert "AWS_ENDPOINT_URL" not in message and "half" not in message


async def test_a_missing_container_token_file_names_the_variable(emulator: Emulator, tmp_path: Path) -> None:
    """A container token file that is not there fails with one line naming the variable and the path."""
    token_file = tmp_path / "absent"
    with pytest.raises(
        IdTokenError, match=f"cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {token_file}"
    ):
        await build("aws", pod_identity_env(emulator, token_file), "https://auth.example.com").read()


async def test_aws_signs_with_an_instance_profile_through_imdsv2(emulator: Emulator) -> None:
    """With nothing else in the chain, IMDSv2 (a session token, then the instance profile's role and
    its credentials) signs the call."""
    env = aws_env(
        emulator,
        AWS_ACCESS_KEY_ID="",
        AWS_SECRET_ACCESS_KEY="",
        AWS_EC2_METADATA_SERVICE_ENDPOINT=emulator.base_url,
        AWS_EC2_METADATA_V1_DISABLED="true",
    )
    token = await build("aws", env, "https://auth.example.com").read()
    claims = unverified_claims(token.value)
    assert claims is not None and claims["sub"] == AWS_ROLE
    assert emulator.platforms.aws._sessions  # temporary credentials were handed out and used


async def test_aws_signs_with_irsas_web_identity_token_file(emulator: Emulator, tmp_path: Path) -> None:
    """With AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (EKS IAM roles for service accounts), the
    service-account token is exchanged at STS (AssumeRoleWithWebIdentity) for the credentials that sign;
    a token STS cannot verify is its InvalidIdentityToken, in one line."""
    token_file = tmp_path / "token"
    token_file.write_text(emulator.issuer.mint("system:serviceaccount:default:app", "sts.amazonaws.com"))
    irsa = {
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
        "AWS_ROLE_ARN": AWS_ROLE,
    }
    token = await build("aws", aws_env(emulator, **irsa), "https://auth.example.com").read()
    assert unverified_claims(token.value) is not None
    token_file.write_text("not-a-jwt")
    with pytest.raises(IdTokenError) as refused:
        await build("aws", aws_env(emulator, **irsa), "https://auth.example.com").read()
    assert "InvalidIdentityToken" in str(refused.value) and "\n" not in str(refused.value)


async def test_aws_refusals_are_stss_own_words_without_secrets(emulator: Emulator) -> None:
    """A wrong secret is STS's SignatureDoesNotMatch, an unknown key its InvalidClientTokenId: one line
    naming the endpoint, with no secret in it."""
    wrong = aws_env(emulator, AWS_SECRET_ACCESS_KEY="not-the-secret-key")
    with pytest.raises(IdTokenError) as refused:
        await build("aws", wrong, "https://auth.example.com").read()
    endpoint = emulator.base_url + awssts.STS_PATH
    assert str(refused.value).startswith(
        f"AWS STS GetWebIdentityToken in eu-west-1 at {endpoint} answered HTTP 403: SignatureDoesNotMatch: "
        "The request signature we calculated does not match the signature you provided."
    )
    assert "not-the-secret-key" not in str(refused.value) and "\n" not in str(refused.value)
    unknown = aws_env(emulator, AWS_ACCESS_KEY_ID="AKIAUNKNOWN000000000")
    with pytest.raises(IdTokenError, match="InvalidClientTokenId"):
        await build("aws", unknown, "https://auth.example.com").read()
    assert "aws" not in emulator.platforms.calls


async def test_aws_without_credentials_names_the_chain(emulator: Emulator) -> None:
    """No keys, no web identity file, no container endpoint, no IMDS: one line, whose fix names the
    chain's places."""
    env = aws_env(emulator, AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="")
    source = build("aws", env, "https://auth.example.com")
    with pytest.raises(IdTokenError) as none:
        await source.read()
    assert str(none.value) == (
        f"AWS STS GetWebIdentityToken in eu-west-1 at {env['AWS_ENDPOINT_URL_STS']}: no AWS credentials found"
    )
    assert explained(source, none.value).message.endswith(
        "credentials come from access keys (AWS_ACCESS_KEY_ID), AWS_WEB_IDENTITY_TOKEN_FILE, "
        "AWS_CONTAINER_CREDENTIALS_FULL_URI, IMDSv2"
    )


async def test_aws_endpoint_and_region_variables_as_the_sdks_read_them(emulator: Emulator) -> None:
    """AWS_ENDPOINT_URL_STS wins over AWS_ENDPOINT_URL, AWS_REGION over AWS_DEFAULT_REGION; without a
    region the source is refused at start naming AWS_REGION."""
    sts = emulator.base_url + awssts.STS_PATH
    general = aws_env(emulator, AWS_ENDPOINT_URL_STS="", AWS_ENDPOINT_URL=sts)
    assert await build("aws", general, "a").read()
    both = aws_env(emulator, AWS_ENDPOINT_URL=CLOSED)
    assert build("aws", both, "a").description.endswith(f" at {sts}")
    ignored = aws_env(emulator, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS="true")
    assert build("aws", ignored, "a").description == "AWS STS GetWebIdentityToken in eu-west-1"
    default = aws_env(emulator, AWS_REGION="", AWS_DEFAULT_REGION="ap-south-1")
    assert build("aws", default, "a").description.startswith("AWS STS GetWebIdentityToken in ap-south-1 ")
    with pytest.raises(ConfigError, match="needs the region: set AWS_REGION"):
        build("aws", aws_env(emulator, AWS_REGION=""), "a")


async def test_aws_endpoint_or_region_botocore_refuses_is_one_line(emulator: Emulator) -> None:
    """An endpoint URL or a region botocore cannot use is one line naming it, not a traceback."""
    with pytest.raises(IdTokenError, match=r"Invalid endpoint: not a url \(check AWS_ENDPOINT_URL_STS"):
        await build("aws", aws_env(emulator, AWS_ENDPOINT_URL_STS="not a url"), "a").read()
    with pytest.raises(IdTokenError, match="Provided region_name 'eu west' doesn't match a supported format"):
        await build("aws", aws_env(emulator, AWS_REGION="eu west"), "a").read()


async def test_aws_sts_that_never_answers_is_one_bounded_line(emulator: Emulator, silent_port: int) -> None:
    """An STS endpoint that accepts and never answers costs the exchange timeout, then one line."""
    env = aws_env(emulator, AWS_ENDPOINT_URL_STS=f"http://127.0.0.1:{silent_port}")
    with pytest.raises(IdTokenError) as silent:
        await build("aws", env, "a", timeout=0.5).read()
    message = str(silent.value)
    assert "\n" not in message and ("did not answer" in message or "timeout" in message.lower())


async def test_auto_chooses_aws_at_start_on_eks_pod_identitys_variables(emulator: Emulator) -> None:
    """AWS_CONTAINER_CREDENTIALS_FULL_URI is AWS's marker: auto chooses aws without asking anything."""
    env = aws_env(emulator, AWS_CONTAINER_CREDENTIALS_FULL_URI="http://169.254.170.23/v1/credentials")
    source = build("auto", env, "a", id_token_file="/nonexistent")
    assert isinstance(source, AutoSource) and source.chosen is not None
    assert source.chosen.name == "aws"
    assert source.why == "AWS_CONTAINER_CREDENTIALS_FULL_URI is set (EKS Pod Identity or ECS)"


async def test_spiffe_mints_a_jwt_svid_for_the_audience_at_every_read(emulator: Emulator) -> None:
    """Each read is one FetchJWTSVID: a JWT-SVID whose subject is the workload's SPIFFE ID."""
    source = build("spiffe", environment("spiffe", emulator), "https://auth.example.com")
    first, second = await source.read(), await source.read()
    assert first.value != second.value and emulator.platforms.calls["spiffe"] == 2
    claims = unverified_claims(first.value)
    assert claims is not None and claims["sub"] == SPIFFE_ID and claims["aud"] == "https://auth.example.com"


async def test_the_emulated_agent_refuses_a_call_without_the_security_header(emulator: Emulator) -> None:
    """Like a SPIRE agent, the emulator refuses a Workload API call without workload.spiffe.io: true."""
    assert emulator.workload_api is not None
    async with grpc.aio.insecure_channel(emulator.workload_api.endpoint) as channel:
        fetch = channel.unary_unary(
            "/SpiffeWorkloadAPI/FetchJWTSVID",
            request_serializer=workload_pb2.JWTSVIDRequest.SerializeToString,
            response_deserializer=workload_pb2.JWTSVIDResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await fetch(workload_pb2.JWTSVIDRequest(audience=["a"]), timeout=5)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "security header missing from request"


@pytest.fixture
def silent_socket() -> Iterator[str]:
    """A Unix socket whose listener accepts connections (the kernel's backlog) and never answers."""
    with spiffe_socket() as path, socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(16)
        yield path


async def test_a_workload_api_that_never_answers_is_one_bounded_line(silent_socket: str) -> None:
    """An agent socket that accepts and never answers costs the exchange timeout, then one line."""
    env = {"SPIFFE_ENDPOINT_SOCKET": f"unix://{silent_socket}"}
    with pytest.raises(IdTokenError) as silent:
        await build("spiffe", env, "a", timeout=0.5).read()
    assert str(silent.value) == (
        f"the SPIFFE Workload API at unix://{silent_socket} (SPIFFE_ENDPOINT_SOCKET) did not answer "
        "within 0.5s"
    )


async def test_a_missing_agent_socket_is_one_line(tmp_path: Path) -> None:
    """No socket at the path: one line saying the Workload API cannot be reached."""
    env = {"SPIFFE_ENDPOINT_SOCKET": f"unix://{tmp_path}/agent.sock"}
    with pytest.raises(IdTokenError) as missing:
        await build("spiffe", env, "a", timeout=2.0).read()
    message = str(missing.value)
    assert message.startswith(f"cannot reach the SPIFFE Workload API at unix://{tmp_path}/agent.sock")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "needs SPIFFE_ENDPOINT_SOCKET"),
        ("/run/spire/agent.sock", "the scheme is unix: or tcp:"),
        ("unix://host/agent.sock", "a unix: address is unix:///ABSOLUTE/PATH"),
        ("tcp://127.0.0.1", "a tcp: address is tcp://IP:PORT"),
    ],
)
def test_spiffe_endpoint_socket_forms_are_checked_at_start(value: str, why: str) -> None:
    """SPIFFE_ENDPOINT_SOCKET must be unix:///PATH or tcp://IP:PORT; anything else is refused at start
    naming the variable."""
    with pytest.raises(ConfigError, match=why):
        build("spiffe", {"SPIFFE_ENDPOINT_SOCKET": value} if value else {}, "a")
    assert build("spiffe", {"SPIFFE_ENDPOINT_SOCKET": "tcp://127.0.0.1:8081"}, "a")


def test_other_sources_load_neither_botocore_nor_grpcio() -> None:
    """The daemon, the doctor and the CLI, with the aws and spiffe sources built, import neither
    botocore nor grpc: they load at an aws or spiffe source's first read only."""
    code = (
        "import sys\n"
        "from tokenrelay.sidecar import daemon\n"
        "from tokenrelay.tokens.idsources import SOURCES, SourceInputs\n"
        "env = {'AWS_REGION': 'us-east-1', 'SPIFFE_ENDPOINT_SOCKET': 'unix:///x.sock'}\n"
        "for name in ('aws', 'spiffe'): SOURCES[name].build(SourceInputs(environ=env, audience='a'))\n"
        "import tokenrelay.doctor.oidc, tokenrelay.cli\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('botocore', 'grpc')))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["aws", "spiffe"])
async def test_a_credential_helpers_direct_exchange_reads_through_the_source(
    name: str, emulator: Emulator
) -> None:
    """With TOKENRELAY_ID_TOKEN_SOURCE naming aws or spiffe, a credential helper's direct exchange
    reads a token minted there for the auth URL (on an event loop of its own, as a helper runs)."""
    from tokenrelay.helpers.direct import read_id_token

    env = {**aws_env(emulator), **environment(name, emulator), "TOKENRELAY_ID_TOKEN_SOURCE": name}
    token = await asyncio.to_thread(
        read_id_token, env, time.time(), auth_url="https://auth.example.com", timeout=5.0
    )
    claims = unverified_claims(token)
    assert claims is not None and claims["aud"] == "https://auth.example.com"
    assert emulator.platforms.calls[name] == 1
