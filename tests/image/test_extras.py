"""The image's extras: built with ``--build-arg EXTRAS=aws,spiffe``, the aws and spiffe OIDC sources run
in it, hardened, against the emulator's AWS STS and SPIFFE Workload API on the host; built without,
each says which build argument it needs (the image has no pip)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenrelay.emulator.platforms.aws import AWS_ROLE
from tokenrelay.emulator.platforms.registry import PLATFORMS
from tokenrelay.emulator.platforms.spiffe import SPIFFE_ID

from ..support.image import Image, RunningEmulator, emulator
from ..support.paths import short_dir
from .test_image import HARDENED, PRESENT

pytestmark = pytest.mark.e2e

UID = 65532  # the image's user


@dataclass
class Platforms:
    """The emulator, its Workload API's socket directory, and what each source's container needs."""

    emulator: RunningEmulator
    spiffe_dir: Path
    owner_token: str
    viewer_role: str

    def identity(self, platform: str, subject: str) -> str:
        """An identity of the seed organization that trusts ``platform``'s tokens for ``subject``."""
        org = self.emulator.organization
        claim_match = {"issuer": PLATFORMS[platform].issuer, "subject": subject}
        made = self.emulator.call(
            "POST", f"/iam/v2beta1/identities/{org}", self.owner_token,
            {"name": f"image-{platform}", "claimMatch": claim_match},
        )  # fmt: skip
        self.emulator.call(
            "POST", f"/iam/v2beta1/roleBindings/{org}", self.owner_token,
            {"identityUid": made["uid"], "roleUid": self.viewer_role},
        )  # fmt: skip
        uid: str = made["uid"]
        return uid

    def env(self, source: str) -> list[str]:
        """The ``docker run`` options that point ``source`` at the emulator's stand-in."""
        if source == "aws":
            # the line `tokenrelay emulate` prints: AWS_ENDPOINT_URL_STS=... AWS_REGION=... keys
            return [f"--env={pair}" for pair in self.emulator.lines["aws"].split()]
        socket = self.spiffe_dir / "agent.sock"
        return [
            f"--volume={self.spiffe_dir}:{self.spiffe_dir}",
            f"--env=SPIFFE_ENDPOINT_SOCKET=unix://{socket}",
        ]


@pytest.fixture(scope="module")
def platforms() -> Iterator[Platforms]:
    spiffe_dir = short_dir("tr-spiffe-", 0o755)
    try:
        with emulator("--spiffe-socket", str(spiffe_dir / "agent.sock")) as upstream:
            # a SPIRE agent's socket is for every workload of the host: the image's user connects
            (spiffe_dir / "agent.sock").chmod(0o666)
            owner_token = upstream.api_token(upstream.owner, upstream.mint())
            roles = upstream.call("GET", "/iam/v2beta1/roles", owner_token)["roles"]
            viewer = next(role["uid"] for role in roles if role["name"] == "viewer")
            yield Platforms(upstream, spiffe_dir, owner_token, viewer)
    finally:
        for child in spiffe_dir.iterdir():
            child.unlink()
        spiffe_dir.rmdir()


def run_once(image: Image, platforms: Platforms, source: str, identity: str, out: Path) -> tuple[int, str]:
    """``tokenrelay run --once --id-token-source SOURCE`` in ``image``, hardened, its token file in
    ``out``: the exit status and stderr."""
    url = platforms.emulator.url
    done = image.engine.docker(
        "run", "--rm", *HARDENED, *platforms.env(source), f"--volume={out}:/out", image.tag,
        "--auth-url", url, "--api-url", url, "--identity", identity, "--id-token-source", source,
        "--once", "--token-file", "/out/api-token", "--log-format", "text",
        check=False,
    )  # fmt: skip
    return done.returncode, done.stderr


@pytest.mark.parametrize(("source", "subject"), [("aws", AWS_ROLE), ("spiffe", SPIFFE_ID)])
def test_an_image_built_with_extras_exchanges_with_the_aws_and_spiffe_sources(
    image_with_extras: Image, platforms: Platforms, source: str, subject: str
) -> None:
    """Built with ``--build-arg EXTRAS=aws,spiffe``, the image runs ``--id-token-source aws`` (botocore
    signing STS's GetWebIdentityToken) and ``spiffe`` (grpcio asking the Workload API) hardened as
    deploy/ runs it, and the API token it writes is one the API accepts."""
    identity = platforms.identity(source, subject)
    out = short_dir(f"tr-{source}-out-", 0o700)
    os.chown(out, UID, UID)
    try:
        status, stderr = run_once(image_with_extras, platforms, source, identity, out)
        assert status == 0, stderr
        token = (out / "api-token").read_text().strip()
        groups = platforms.emulator.call("GET", "/iam/v2beta1/groups", token)["groups"]
        assert "acme" in groups[0]["name"]
        assert token not in stderr
    finally:
        for child in out.iterdir():
            child.unlink()
        out.rmdir()


def test_the_extras_image_keeps_grpc_and_protobuf_but_not_pip(image_with_extras: Image) -> None:
    """With the spiffe extra the image keeps grpcio and protobuf, which its source runs on, and still
    leaves out pip, setuptools and the rest of the emulator's gRPC stack."""
    probe = image_with_extras.engine.docker(
        "run", "--rm", *HARDENED, "--entrypoint=python", image_with_extras.tag, "-c", PRESENT,
    )  # fmt: skip
    assert probe.stdout.strip() == "['grpc', 'google.protobuf']"


@pytest.mark.parametrize("source", ["aws", "spiffe"])
def test_the_default_image_names_the_build_argument_a_source_needs(image: Image, source: str) -> None:
    """Without extras, ``--id-token-source aws`` or ``spiffe`` stops at once with one line naming
    ``--build-arg EXTRAS=...``, not a pip command the image cannot run."""
    done = image.engine.docker(
        "run", "--rm", *HARDENED, "--env=SPIFFE_ENDPOINT_SOCKET=unix:///run/spire/api.sock", image.tag,
        "--auth-url", "https://auth.example.com", "--api-url", "https://api.example.com",
        "--identity", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4/0cc175b9c0f1b6a8",
        "--id-token-source", source,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"--build-arg EXTRAS={source}" in done.stderr
    assert "pip install" not in done.stderr
