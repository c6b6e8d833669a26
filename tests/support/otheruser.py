"""tokenrelay as another local user starts it, wherever the checkout lives.

Tests that act as uid 65534 (nobody) cannot run the virtualenv's ``tokenrelay``: a checkout under
``/root`` or in a ``mktemp -d`` (both 0700) is out of that user's reach. They run this copy instead:
the package under test and its runtime dependencies, hard-linked (copied across filesystems) into a
0755 directory under /tmp, started by an interpreter of the same version that nobody can run.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import tokenrelay

from .paths import short_dir

OTHER_UID = 65534  # nobody


@dataclass(frozen=True)
class OtherUserInstall:
    """A tokenrelay that OTHER_UID can start: ``bin/tokenrelay`` with ``lib/`` on its path."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def tokenrelay(self) -> Path:
        return self.bin / "tokenrelay"


def as_other_user() -> list[str]:
    """The command prefix that drops root to OTHER_UID, with no supplementary groups."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        if os.environ.get("CI"):
            pytest.fail("setpriv is not installed, and CI is set: it comes with util-linux")
        pytest.skip("setpriv is not installed")
    uid = str(OTHER_UID)
    return [setpriv, "--reuid", uid, "--regid", uid, "--clear-groups"]


def _probe(python: str, prefix: list[str]) -> str | None:
    result = subprocess.run(
        [*prefix, python, "-I", "-c", "import sys; print(sys.version_info[:2], sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
        timeout=60,
    )
    return result.stdout if result.returncode == 0 else None


def _interpreter() -> str:
    """The first interpreter of this version that OTHER_UID runs as root does (same stdlib): the
    venv's own base first, then the system's."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates: list[str] = [os.path.realpath(sys._base_executable), os.path.realpath(sys.executable)]  # type: ignore[attr-defined]
    candidates += [found for found in [shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")] if found]
    for python in dict.fromkeys(candidates):
        expected = _probe(python, [])
        if expected is not None and _probe(python, as_other_user()) == expected:
            return python
    pytest.skip(f"no {version} that uid {OTHER_UID} may run: install one outside private directories")


def _runtime_distributions() -> list[metadata.Distribution]:
    """tokenrelay's dependencies, transitively, with the markers of this interpreter and no extras."""
    seen: dict[str, metadata.Distribution] = {}
    pending = [Requirement(r) for r in metadata.requires("tokenrelay") or []]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = requirement.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen[name] = metadata.distribution(name)
        pending += [Requirement(r) for r in seen[name].requires or []]
    return list(seen.values())


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        target.hardlink_to(source)
    except OSError:  # another filesystem
        shutil.copy2(source, target)


@functools.cache
def other_user_install() -> OtherUserInstall:
    """Built once per test session, removed at exit."""
    install = OtherUserInstall(short_dir("tr-other-user-", 0o755))
    atexit.register(shutil.rmtree, install.root, ignore_errors=True)
    lib = install.root / "lib"
    package = Path(tokenrelay.__file__).parent
    for source in package.rglob("*"):
        if source.is_file() and "__pycache__" not in source.parts:
            _link(source, lib / "tokenrelay" / source.relative_to(package))
    for distribution in _runtime_distributions():
        for file in distribution.files or []:
            source = Path(str(distribution.locate_file(file)))
            if ".." not in file.parts and "__pycache__" not in file.parts and source.is_file():
                _link(source, lib / file)
    install.bin.mkdir()
    install.tokenrelay.write_text(
        f"#!{_interpreter()} -I\nimport sys\nsys.path.insert(0, {str(lib)!r})\n"
        "from tokenrelay.cli import main\nsys.exit(main())\n"
    )
    install.tokenrelay.chmod(0o755)
    for directory in [install.root, *(p for p in install.root.rglob("*") if p.is_dir())]:
        directory.chmod(0o755)
    return install
