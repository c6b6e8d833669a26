"""Building the package: no deprecation warning from setuptools, the SPDX licence in the metadata, and
the emulator's .proto files in the wheel."""

from __future__ import annotations

import asyncio
import email
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from tokenrelay.emulator import Emulator, EmulatorServer

from ..support.grpcurl import grpcurl_path

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel ``pip wheel`` builds of a copy of the tree, and pip's output."""
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    for name in ("src", "scripts"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    # No build isolation: the test environment's setuptools, so that no test reaches the network.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", "dist", "."],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    (wheel,) = (tree / "dist").glob("tokenrelay-*.whl")
    return wheel, output


def test_the_wheel_builds_without_a_deprecation_warning(built: tuple[Path, str]) -> None:
    """``pip wheel`` of the tree, with a setuptools the build requires allow, warns of nothing deprecated
    and records ``License-Expression: Apache-2.0``."""
    (requirement,) = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert requirement.startswith("setuptools")
    assert version("setuptools") in SpecifierSet(requirement.removeprefix("setuptools"))
    wheel, output = built
    assert "SetuptoolsDeprecationWarning" not in output
    assert "deprecated" not in output.lower()
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License"] is None


async def test_the_wheels_proto_files_let_grpcurl_call_the_emulator(
    built: tuple[Path, str], tmp_path: Path
) -> None:
    """The wheel ships the emulator's .proto files, and the real grpcurl, given only those (no
    reflection), lists the services and calls one, as docs/emulator.md shows for a pip install."""
    with zipfile.ZipFile(built[0]) as archive:
        protos = [n for n in archive.namelist() if n.endswith(".proto")]
        archive.extractall(tmp_path, protos)
    assert sorted(Path(n).name for n in protos) == ["iam.proto", "registry.proto", "vulnerabilities.proto"]
    files = [arg for name in protos for arg in ("-proto", name)]
    async with EmulatorServer(Emulator()) as server:
        org = server.emulator.organization("acme")
        identity = server.emulator.workload(org.uid, subject="sub", role="viewer").identity
        token = server.emulator.api_token(identity.uid)
        target = server.url.removeprefix("http://")

        def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
            command = [grpcurl_path(), "-plaintext", "-import-path", str(tmp_path), *files, *args]
            return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)

        loop = asyncio.get_running_loop()
        listed = await loop.run_in_executor(None, grpcurl, target, "list")
        called = await loop.run_in_executor(
            None, grpcurl, "-H", f"authorization: Bearer {token}", target, "iam.v2beta1.Groups/ListGroups"
        )
    assert listed.returncode == 0, listed.stderr
    assert {"iam.v2beta1.Groups", "registry.v2beta1.Repos", "vulnerabilities.v2beta1.Advisories"} <= set(
        listed.stdout.split()
    )
    assert called.returncode == 0, called.stderr
    assert [g["name"] for g in json.loads(called.stdout)["groups"]] == ["acme"]
