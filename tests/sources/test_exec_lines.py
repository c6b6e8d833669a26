"""The line `tokenrelay exec` prints when its OIDC token source fails as the platform would fail it:
what went wrong, then the source's fix naming the flag, variable or setting to change; one line, no
traceback, no secret. Each source of the registry has its case."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tokenrelay.testing import make_jwt
from tokenrelay.tokens.idsources import SOURCES

from ..support.helpers import script

AUDIENCE = "https://api.example.test"
# what each platform's endpoint answers a workload that has no identity there (or a bad credential)
REFUSALS: dict[str, tuple[int, str, bytes]] = {
    "/computeMetadata/v1/instance/service-accounts/default/identity": (
        404,
        "text/html",
        b"Not Found: no service account is attached to this instance",
    ),
    "/metadata/identity/oauth2/token": (
        400,
        "application/json",
        b'{"error": "invalid_request", "error_description": "Identity not found"}',
    ),
    "/github": (403, "application/json", b'{"message": "Unable to authorize request"}'),
    "/ado": (
        401,
        "application/json",
        b'{"message": "TF400813: The user is not authorized to access this resource."}',
    ),
    "/platforms/circleci/oidc": (401, "application/json", b'{"message": "not in a job"}'),
    "/sts": (
        403,
        "text/xml",
        b'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
        b"<Code>AccessDenied</Code><Message>User: arn:aws:iam::123456789012:user/ci is not authorized to "
        b"perform: sts:GetWebIdentityToken</Message></Error><RequestId>1</RequestId></ErrorResponse>",
    ),
}
# secrets a platform hands the job: never in the line
SECRETS = {
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "gh-request-secret",
    "SYSTEM_ACCESSTOKEN": "ado-access-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-key-never-shown",
}
EXPIRED = make_jwt({"sub": "job", "iat": 1_000_000_000, "exp": 1_000_003_600, "nonce": "n" * 16})


# what an endpoint that echoes its request (a misconfigured proxy, a debugging stand-in) quotes back
ECHOED = {"host", "accept", "accept-encoding", "user-agent", "content-length", "content-type"}


class _Refuser(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        status, kind, body = REFUSALS.get(self.path.split("?")[0], (404, "text/plain", b"no such path"))
        if self.path.startswith("/echo"):
            said = [f"{name}: {value}" for name, value in self.headers.items() if name.lower() not in ECHOED]
            body = json.dumps({"message": f"refused {', '.join(said)} at {self.path}"}).encode()
            status, kind = 400, "application/json"
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def platform() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of every platform's endpoint, each refusing as the platform does."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuser)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@dataclass(frozen=True)
class Case:
    env: dict[str, str] = field(default_factory=dict)  # {URL}: the platform's; {TMP}: the test's directory
    flags: tuple[str, ...] = ()
    says: str = ""  # what went wrong
    fix: str = ""  # the fix, naming what to change


CASES = {
    "file": Case(
        flags=("--id-token-file={TMP}/absent",),
        says="no OIDC token file at {TMP}/absent",
        fix="or point --id-token-file (env TOKENRELAY_ID_TOKEN_FILE) at the token file itself",
    ),
    "env": Case(
        env={"OIDC_TOKEN": EXPIRED},
        flags=("--id-token-env=OIDC_TOKEN",),
        says="the OIDC token in environment variable OIDC_TOKEN expired at 2001-09-09T02:46:40.000Z",
        fix="export a fresh OIDC token in OIDC_TOKEN: whatever sets it has stopped renewing it",
    ),
    "github-actions": Case(
        env={
            "ACTIONS_ID_TOKEN_REQUEST_URL": "{URL}/github?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": SECRETS["ACTIONS_ID_TOKEN_REQUEST_TOKEN"],
        },
        says="GitHub Actions' OIDC endpoint answered HTTP 403: Unable to authorize request",
        fix="give the job `permissions: id-token: write` (GitHub Actions)",
    ),
    "gitlab": Case(
        env={"GITLAB_CI": "true"},
        says="GitLab CI variable TOKENRELAY_ID_TOKEN is not set",
        fix="declare `id_tokens: {TOKENRELAY_ID_TOKEN: {aud: <the --auth-url>}}` in the job "
        "(or name the job's variable with --id-token-env (env TOKENRELAY_ID_TOKEN_ENV))",
    ),
    "buildkite": Case(
        env={"BUILDKITE": "true"},  # outside a job step: no BUILDKITE_AGENT_ACCESS_TOKEN
        says="`buildkite-agent oidc request-token` failed with exit status 1: buildkite-agent: fatal: "
        "BUILDKITE_AGENT_ACCESS_TOKEN is not set: run inside a job",
        fix="the agent needs its job's BUILDKITE_AGENT_ACCESS_TOKEN",
    ),
    "circleci": Case(
        env={"TOKENRELAY_EMULATOR_URL": "{URL}"},  # where the stand-in CLI asks
        says="`circleci run oidc get` failed with exit status 1: circleci: fatal: the endpoint answered "
        "HTTP 401",
        fix="the `circleci` CLI on PATH mints only inside a job (without it, tokenrelay reads "
        "CIRCLE_OIDC_TOKEN_V2 or CIRCLE_OIDC_TOKEN)",
    ),
    "bitbucket": Case(
        env={"BITBUCKET_BUILD_NUMBER": "7"},  # a step without `oidc: true`
        says="Bitbucket Pipelines variable BITBUCKET_STEP_OIDC_TOKEN is not set",
        fix="add `oidc: true` to the step, which sets BITBUCKET_STEP_OIDC_TOKEN",
    ),
    "azure-pipelines": Case(
        env={
            "SYSTEM_OIDCREQUESTURI": "{URL}/ado",
            "SYSTEM_ACCESSTOKEN": SECRETS["SYSTEM_ACCESSTOKEN"],
            "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID": "0b1c2d3e-conn",
        },
        says="Azure Pipelines' OIDC endpoint (SYSTEM_OIDCREQUESTURI) for service connection 0b1c2d3e-conn "
        "answered HTTP 401: TF400813: The user is not authorized to access this resource",
        fix="map the job's access token into the step (`env: SYSTEM_ACCESSTOKEN: $(System.AccessToken)`) "
        "and name the workload-identity service connection with --azure-service-connection-id",
    ),
    "gcp": Case(
        env={"GCE_METADATA_HOST": "{HOST}"},
        says="the GCP metadata server at {HOST} answered HTTP 404: Not Found: no service account is "
        "attached to this instance",
        fix="off Google Cloud, point GCE_METADATA_HOST at a metadata server",
    ),
    "azure": Case(
        env={"AZURE_POD_IDENTITY_AUTHORITY_HOST": "{URL}"},
        says="Azure's instance metadata service at {URL} answered HTTP 400: Identity not found",
        fix="with several, name the one to use in AZURE_CLIENT_ID",
    ),
    "aws": Case(
        env={
            "AWS_REGION": "eu-west-1",
            "AWS_ENDPOINT_URL_STS": "{URL}/sts",
            "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
            "AWS_SECRET_ACCESS_KEY": SECRETS["AWS_SECRET_ACCESS_KEY"],
        },
        says="AWS STS GetWebIdentityToken in eu-west-1 at {URL}/sts answered HTTP 403: AccessDenied: User: "
        "arn:aws:iam::123456789012:user/ci is not authorized to perform: sts:GetWebIdentityToken",
        fix="and set AWS_REGION; credentials come from access keys (AWS_ACCESS_KEY_ID), "
        "AWS_WEB_IDENTITY_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_FULL_URI, IMDSv2",
    ),
    "spiffe": Case(
        env={"SPIFFE_ENDPOINT_SOCKET": "unix://{TMP}/agent.sock"},  # no agent runs
        says="cannot reach the SPIFFE Workload API at unix://{TMP}/agent.sock (SPIFFE_ENDPOINT_SOCKET)",
        fix="run a SPIFFE Workload API (a SPIRE agent) and set SPIFFE_ENDPOINT_SOCKET to its socket",
    ),
    "auto": Case(
        # off every cloud: both metadata servers refuse, AWS has no region
        env={"GCE_METADATA_HOST": "{HOST}", "AZURE_POD_IDENTITY_AUTHORITY_HOST": "{URL}"},
        flags=("--id-token-file={TMP}/absent",),
        says="--id-token-source auto found no OIDC token",
        fix="choose the platform's source with --id-token-source (see docs/platforms/)",
    ),
}


def test_every_source_has_its_case() -> None:
    """A source added to the registry gets its failing line checked here too."""
    assert set(CASES) == set(SOURCES)


@pytest.mark.parametrize("name", list(CASES))
def test_a_failing_source_is_one_line_naming_its_fix(
    name: str, platform: str, bin_dir: Path, tmp_path: Path
) -> None:
    """`tokenrelay exec` whose source fails as its platform would exits 125 with one line: what went
    wrong, then the source's fix; no traceback, no secret, and the command never runs."""
    case = CASES[name]

    def filled(text: str) -> str:
        host = platform.removeprefix("http://")
        return text.replace("{URL}", platform).replace("{HOST}", host).replace("{TMP}", str(tmp_path))

    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",  # the platforms' stand-in commands
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "LANG": "C.UTF-8",
        **{key: filled(value) for key, value in case.env.items()},
    }
    marker = tmp_path / "ran"
    argv = [
        script("tokenrelay"),
        "exec",
        "--auth-url=http://127.0.0.1:9",
        f"--api-url={AUDIENCE}",
        "--identity=acme/ci",
        f"--id-token-source={name}",
        "--log-level=error",
        *(filled(flag) for flag in case.flags),
        "--",
        "touch",
        str(marker),
    ]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    [line] = result.stderr.splitlines()
    assert result.returncode == 125, line
    said = f"tokenrelay exec: no token for audience {AUDIENCE}: {filled(case.says)}"
    assert line.startswith(said), line
    assert filled(case.fix) in line[len(said) :], line
    assert ".;" not in line, line  # the platform's full stop gives way to the fix
    assert not marker.exists()
    assert "Traceback" not in result.stderr
    for secret in (*SECRETS.values(), EXPIRED, EXPIRED.split(".")[1]):
        assert secret not in result.stderr + result.stdout


SIGNATURE = "sig0123456789abcdef0123456789"
ECHOES = {
    "azure": {"IDENTITY_ENDPOINT": "{URL}/echo", "IDENTITY_HEADER": "azure-identity-header-secret"},
    "github-actions": {
        "ACTIONS_ID_TOKEN_REQUEST_URL": "{URL}/echo?api-version=2.0&sig=" + SIGNATURE,
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": SECRETS["ACTIONS_ID_TOKEN_REQUEST_TOKEN"],
    },
    "azure-pipelines": {
        "SYSTEM_OIDCREQUESTURI": "{URL}/echo?sig=" + SIGNATURE,
        "SYSTEM_ACCESSTOKEN": SECRETS["SYSTEM_ACCESSTOKEN"],
        "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID": "0b1c2d3e-conn",
    },
}


@pytest.mark.parametrize("name", list(ECHOES))
def test_an_endpoint_that_echoes_its_request_never_puts_the_platforms_secret_in_the_line(
    name: str, platform: str, tmp_path: Path
) -> None:
    """A platform endpoint that quotes back the headers and the URL it got: exec's failure line has
    the platform's words with the source's own secrets (identity header, request token, signed query)
    as [secure]."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    env.update({key: value.replace("{URL}", platform) for key, value in ECHOES[name].items()})
    argv = [
        script("tokenrelay"),
        "exec",
        "--auth-url=http://127.0.0.1:9",
        f"--api-url={AUDIENCE}",
        "--identity=acme/ci",
        f"--id-token-source={name}",
        "--log-level=error",
        "--",
        "true",
    ]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    [line] = result.stderr.splitlines()
    assert result.returncode == 125, line
    assert "answered HTTP 400: refused " in line and "[secure]" in line, line
    for secret in ("azure-identity-header-secret", SIGNATURE, *SECRETS.values()):
        assert secret not in result.stderr + result.stdout
