"""Each platform's environment as its runner or cloud would set it, pointed at an emulator.

``environment(name, url, bin_dir)`` is what a job on platform ``name`` would see, with every endpoint
the emulator's (``url``) and the platform's commands the emulator's stand-ins (``bin_dir`` on PATH).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tokenrelay.emulator.app import Emulator
from tokenrelay.emulator.platforms import aws as awssts
from tokenrelay.emulator.platforms.registry import mint

# the variables of a three-hour job: set once, they outlive it
JOB_TOKEN_LIFETIME = 4 * 3600.0


def write_stand_ins(directory: Path) -> Path:
    """``buildkite-agent`` and ``circleci`` scripts that run the emulator's stand-ins."""
    for command in ("buildkite-agent", "circleci"):
        script = directory / command
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tokenrelay emulate {command} "$@"\n')
        script.chmod(0o755)
    return directory


def environment(
    name: str, emulator: Emulator, bin_dir: Path | None = None, lifetime: float = JOB_TOKEN_LIFETIME
) -> dict[str, str]:
    """The environment platform ``name`` gives a job, its endpoints at ``emulator``."""
    url = emulator.base_url
    host = url.removeprefix("http://")
    path = os.pathsep.join([str(bin_dir)] if bin_dir else []) or "/nonexistent"
    base = {"PATH": path, "TOKENRELAY_EMULATOR_URL": url}
    issued = {
        "gitlab": lambda: mint(emulator.issuer, "gitlab", url, lifetime),
        "bitbucket": lambda: mint(emulator.issuer, "bitbucket", url, lifetime),
        "circleci": lambda: mint(emulator.issuer, "circleci", None, lifetime),
    }
    if name == "github-actions":
        return {
            **base,
            "GITHUB_ACTIONS": "true",
            "ACTIONS_ID_TOKEN_REQUEST_URL": f"{url}/platforms/github-actions/token?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "gh-request-token",
        }
    if name == "gitlab":
        return {**base, "GITLAB_CI": "true", "TOKENRELAY_ID_TOKEN": issued["gitlab"]()}
    if name == "bitbucket":
        return {**base, "BITBUCKET_BUILD_NUMBER": "7", "BITBUCKET_STEP_OIDC_TOKEN": issued["bitbucket"]()}
    if name == "circleci":
        return {**base, "CIRCLECI": "true", "CIRCLE_OIDC_TOKEN_V2": issued["circleci"]()}
    if name == "buildkite":
        return {
            **base,
            "BUILDKITE": "true",
            "BUILDKITE_AGENT_ACCESS_TOKEN": "bk-agent-token",
            "BUILDKITE_AGENT_ENDPOINT": f"{url}/platforms/buildkite/v3",
            "BUILDKITE_JOB_ID": "0190f2c4-7a3e-4b8e-9d2c-5f1a6b7c8d9e",
        }
    if name == "azure-pipelines":
        return {
            **base,
            "TF_BUILD": "True",
            "SYSTEM_OIDCREQUESTURI": f"{url}/platforms/azure-pipelines/oidctoken",
            "SYSTEM_ACCESSTOKEN": "ado-access-token",
            "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID": "0b1c2d3e-conn",
        }
    if name == "gcp":
        return {**base, "GCE_METADATA_HOST": host}
    if name == "azure":
        return {**base, "AZURE_POD_IDENTITY_AUTHORITY_HOST": url}
    if name == "aws":
        return {
            **base,
            "AWS_REGION": "eu-west-1",
            "AWS_ENDPOINT_URL_STS": url + awssts.STS_PATH,
            "AWS_ACCESS_KEY_ID": awssts.TEST_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": awssts.TEST_SECRET_KEY,
        }
    if name == "spiffe":
        if emulator.workload_api is None:
            raise RuntimeError("serve the emulator with EmulatorServer(..., spiffe_socket=PATH)")
        return {**base, "SPIFFE_ENDPOINT_SOCKET": emulator.workload_api.endpoint}
    raise KeyError(name)


@contextlib.contextmanager
def spiffe_socket() -> Iterator[str]:
    """A path for the emulator's Workload API socket, short enough for a Unix socket's 108 bytes."""
    with tempfile.TemporaryDirectory(prefix="tr-spiffe-") as directory:
        yield os.path.join(directory, "agent.sock")
