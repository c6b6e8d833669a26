"""Building the package: no deprecation warning from setuptools, and the SPDX licence in the metadata."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def test_the_wheel_builds_without_a_deprecation_warning(tmp_path: Path) -> None:
    """``pip wheel`` of the tree, with a setuptools the build requires allow, warns of nothing deprecated
    and records ``License-Expression: Apache-2.0``."""
    (requirement,) = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert requirement.startswith("setuptools")
    assert version("setuptools") in SpecifierSet(requirement.removeprefix("setuptools"))
    tree = tmp_path / "tree"
    tree.mkdir()
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
    assert "SetuptoolsDeprecationWarning" not in output
    assert "deprecated" not in output.lower()
    (wheel,) = (tree / "dist").glob("tokenrelay-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License"] is None
