"""The command's private directory and environment: what ``tokenrelay exec`` and its ``--configure``
targets may change, and nothing else.

The directory is fresh and 0700 (``serving.socketdir``); it holds the local API's socket, links to
the credential helpers under ``bin/`` (first on the command's PATH, so that a client that runs
``docker-credential-tokenrelay`` finds it even when tokenrelay's own ``bin`` is not on PATH, without
putting that directory's python and pip ahead of the command's), and whatever files the targets
write. The caller removes it.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ConfigError
from ..helpers.hosts import Host
from ..lite.names import HOSTS_ENV, SOCKET_ENV
from ..serving.socketdir import SOCKET_NAME
from ..sidecar.settings import Settings

# On the command's PATH whatever it configures: `tokenrelay token`, and the helpers its own
# configuration may name.
ALWAYS_LINKED = ("tokenrelay", "docker-credential-tokenrelay", "git-credential-tokenrelay")


class Workspace:
    """The private directory, the command's environment (``env``, a copy of ours to change) and the
    relay's settings (``settings``: a target that needs the relay to keep a file fresh in the
    private directory replaces them with ones that say so)."""

    def __init__(
        self, private: Path, environ: Mapping[str, str], hosts: Sequence[Host], settings: Settings
    ) -> None:
        self.private = private
        self.env = dict(environ)
        self.hosts = tuple(hosts)
        self.settings = settings
        self._bin: Path | None = None
        self.env[SOCKET_ENV] = str(self.socket)
        for name in ALWAYS_LINKED:
            if installed(name) is not None:
                self.helper(name, needed_by="")
        if self.hosts:
            # The command's helpers read the list from here, not from a --config file it may not see.
            self.env[HOSTS_ENV] = ",".join(f"{host.netloc}={host.audience}" for host in self.hosts)

    @property
    def socket(self) -> Path:
        return self.private / SOCKET_NAME

    def write(self, relative: str, text: str) -> Path:
        """Write a private file (0600, in 0700 directories) and return its path."""
        path = self.private / relative
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as f:
            f.write(text)
        return path

    def helper(self, name: str, *, needed_by: str) -> Path:
        """A link to the installed executable ``name`` in the private ``bin``, which is first on the
        command's PATH; raises ConfigError naming ``needed_by`` (the flag) when it is not installed."""
        if self._bin is None:
            self._bin = self.private / "bin"
            self._bin.mkdir(mode=0o700)
            self.env["PATH"] = os.pathsep.join(filter(None, (str(self._bin), self.env.get("PATH"))))
        link = self._bin / name
        if not link.exists():
            target = installed(name)
            if target is None:
                raise ConfigError(
                    f"{needed_by} needs {name}, which is installed with tokenrelay but is not found "
                    f"beside it ({scripts_directory()}); reinstall tokenrelay"
                )
            link.symlink_to(target)
        return link

    def render(self, name: str, relative: str, source: Path, *, needed_by: str) -> Path:
        """A private copy of the user's file ``source`` (empty when there is none) that the relay
        keeps fresh as a --render of format ``name`` (see ``tokenrelay.render``), for the command's
        clients to read instead; raises ConfigError naming ``needed_by`` (the flag)."""
        from dataclasses import replace

        from .. import render

        try:
            text = source.read_text() if source.is_file() else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{needed_by}: cannot read {source} to copy it: {exc}") from None
        path = self.write(relative, text)
        spec = f"{name}={path}"
        try:
            render.parse(spec, render.options(self.settings)).format.check(self.hosts)
        except ValueError as exc:
            raise ConfigError(f"{needed_by}: {exc}") from None
        self.settings = replace(self.settings, render=(*self.settings.render, spec))
        return path

    def home(self) -> Path:
        """The command's home directory, as its clients will see it."""
        return Path(self.env.get("HOME") or Path.home())


def scripts_directory() -> str:
    """Where pip put this installation's scripts (the helpers beside the ``tokenrelay`` command)."""
    return sysconfig.get_path("scripts")


def installed(name: str) -> str | None:
    """The executable ``name`` of this installation: beside the interpreter's scripts, beside the
    ``tokenrelay`` that runs, else the first on our PATH."""
    for directory in (scripts_directory(), str(Path(sys.argv[0]).parent)):
        candidate = Path(directory, name)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.resolve())
    return shutil.which(name)
