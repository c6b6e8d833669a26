"""``tokenrelay exec --configure``: one class per family of clients, registered in TARGETS.

A target sets its clients up, for the command only, to take credentials from tokenrelay's helpers
for the configured hosts: it changes the command's environment and writes files in the private
directory (a ``Workspace``), and nothing anywhere else. A client that reads its token from a file
rather than a helper can have the relay keep such a file fresh there, through the relay's settings
the workspace also holds. Adding one (npm, maven, netrc, ...) touches
its class, its row in TARGETS, docs/exec.md and its test; nothing else switches on a target's name.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError
from ..helpers.hosts import Host
from ..lite import extras
from ..lite.names import flag
from ..lite.netloc import is_loopback
from .workspace import Workspace

ALL = "all"
CONFIGURE = flag("configure")


class Target(Protocol):
    """One ``--configure`` target."""

    name: str
    summary: str  # one line for the docs: which clients, and how

    def apply(self, workspace: Workspace) -> None:
        """Set the clients up in ``workspace``; raises ConfigError naming what to fix."""


class Docker:
    """docker, podman, skopeo and buildah: private copies of their configuration files whose
    ``credHelpers`` send every host to ``docker-credential-tokenrelay``."""

    name = "docker"
    summary = (
        "docker, podman, skopeo, buildah: a private `DOCKER_CONFIG` and `REGISTRY_AUTH_FILE`, copies of "
        "yours, whose `credHelpers` send each host to `docker-credential-tokenrelay`"
    )
    helper = "tokenrelay"  # credHelpers value: the client runs docker-credential-<value>

    def apply(self, workspace: Workspace) -> None:
        workspace.helper("docker-credential-tokenrelay", needed_by=f"{CONFIGURE} docker")
        env = workspace.env
        docker_dir = Path(env.get("DOCKER_CONFIG") or workspace.home() / ".docker")
        docker_file = docker_dir / "config.json"
        private_dir = workspace.private / "docker"
        config = self._with_helpers(_read_config(docker_file, "DOCKER_CONFIG"), workspace.hosts)
        workspace.write("docker/config.json", json.dumps(config, indent=2))
        _link_siblings(docker_dir, private_dir, skip="config.json")  # contexts, cli-plugins, ...
        env["DOCKER_CONFIG"] = str(private_dir)
        # podman, skopeo and buildah search their own files before docker's, and a login kept there
        # would win over credHelpers: one private file, every login of the chain, ours on top.
        auth: dict[str, Any] = {}
        for path in _containers_auth_chain(env, workspace.home(), docker_file):
            auth = _merge(auth, _read_config(path, "REGISTRY_AUTH_FILE"))
        env["REGISTRY_AUTH_FILE"] = str(
            workspace.write("containers/auth.json", json.dumps(self._with_helpers(auth, workspace.hosts)))
        )

    def _with_helpers(self, config: dict[str, Any], hosts: Iterable[Host]) -> dict[str, Any]:
        helpers = dict(config.get("credHelpers") or {})
        auths = dict(config.get("auths") or {})
        for host in hosts:
            helpers[host.netloc] = self.helper
            auths.pop(host.netloc, None)  # a stored login must not stand in front of the helper
        return {**config, "auths": auths, "credHelpers": helpers}


class Git:
    """git: ``credential.<url>.helper`` for each host through ``GIT_CONFIG_COUNT``, after the empty
    value that resets the helpers configured before, so no storing helper gets the token."""

    name = "git"
    summary = (
        "git: `credential.<url>.helper` for each host through `GIT_CONFIG_COUNT`/`KEY`/`VALUE`, after an "
        "empty value that keeps storing helpers out"
    )

    def apply(self, workspace: Workspace) -> None:
        where = f"{CONFIGURE} git"
        helper = str(workspace.helper("git-credential-tokenrelay", needed_by=where))
        # git runs an absolute path as it is, and anything else after "!" through the shell
        command = helper if shlex.quote(helper) == helper else "!" + shlex.quote(helper)
        env = workspace.env
        text = env.get("GIT_CONFIG_COUNT", "").strip() or "0"
        if not text.isdigit():
            raise ConfigError(f"{where}: GIT_CONFIG_COUNT is {text!r}, not a number; fix or unset it")
        index = int(text)
        for host in workspace.hosts:
            # plain http gets a token on loopback only (helpers.hosts.match): no entry elsewhere
            schemes = ("https", "http") if is_loopback(host.name) else ("https",)
            for scheme in schemes:
                key = f"credential.{scheme}://{host.netloc}.helper"
                for value in ("", command):
                    env[f"GIT_CONFIG_KEY_{index}"] = key
                    env[f"GIT_CONFIG_VALUE_{index}"] = value
                    index += 1
        env["GIT_CONFIG_COUNT"] = str(index)


class Pip:
    """pip: its ``import`` keyring provider, which finds tokenrelay's keyring backend by its entry
    point. That provider asks the keyring before the first request and needs no username in the
    index URL, so it works with indexes that answer 401 and 403 alike."""

    name = "pip"
    summary = (
        "pip: `PIP_KEYRING_PROVIDER=import`, which loads tokenrelay's keyring backend in the pip of "
        "tokenrelay's Python environment; `keyring` on PATH for `--keyring-provider subprocess`"
    )

    def apply(self, workspace: Workspace) -> None:
        command = extras.missing("keyring", "keyring")
        if command is not None:
            raise ConfigError(f"{CONFIGURE} pip needs the keyring package beside tokenrelay: {command}")
        workspace.env["PIP_KEYRING_PROVIDER"] = "import"
        workspace.helper("keyring", needed_by=f"{CONFIGURE} pip")


class Npm:
    """npm and pnpm: a private copy of the user's ``.npmrc`` that the relay renders (``npmrc``) with an
    ``_authToken`` per host at every refresh, named by ``NPM_CONFIG_USERCONFIG``."""

    name = "npm"
    summary = (
        "npm, pnpm: `NPM_CONFIG_USERCONFIG` names a private copy of your `.npmrc` with a "
        "`//HOST/:_authToken=` per host, kept fresh at every refresh (`--render npmrc`)"
    )

    def apply(self, workspace: Workspace) -> None:
        env = workspace.env
        source = Path(env.get("NPM_CONFIG_USERCONFIG") or workspace.home() / ".npmrc")
        path = workspace.render("npmrc", "npm/npmrc", source, needed_by=f"{CONFIGURE} npm")
        env["NPM_CONFIG_USERCONFIG"] = str(path)


class Maven:
    """Maven: a private copy of the user's ``settings.xml`` that the relay renders (``maven``) with a
    ``<server>`` per host, passed as ``-s`` in ``MAVEN_ARGS``, which Maven 3.9 and later read; before
    3.9 the command says ``mvn $MAVEN_ARGS`` itself."""

    name = "maven"
    summary = (
        "Maven: `MAVEN_ARGS=-s FILE`, a private copy of your `~/.m2/settings.xml` with a `<server>` per "
        "host (`--render-maven-ids` for its id), kept fresh (`--render maven`); Maven before 3.9 needs "
        "`mvn $MAVEN_ARGS`"
    )

    def apply(self, workspace: Workspace) -> None:
        source = workspace.home() / ".m2" / "settings.xml"
        path = workspace.render("maven", "maven/settings.xml", source, needed_by=f"{CONFIGURE} maven")
        given = workspace.env.get("MAVEN_ARGS", "").strip()
        workspace.env["MAVEN_ARGS"] = " ".join(filter(None, (given, "-s", shlex.quote(str(path)))))


class Netrc:
    """Whatever reads ``NETRC`` (Python's requests, pip, uv, Go's ``GOAUTH=netrc``; curl with
    ``--netrc-file "$NETRC"``): a private copy of the user's ``.netrc`` that the relay renders
    (``netrc``) with a ``machine`` per host."""

    name = "netrc"
    summary = (
        'requests, pip, uv, Go, `curl --netrc-file "$NETRC"`: `NETRC` names a private copy of your '
        "`.netrc` with a `machine` per host, kept fresh (`--render netrc`)"
    )

    def apply(self, workspace: Workspace) -> None:
        env = workspace.env
        source = Path(env.get("NETRC") or workspace.home() / ".netrc")
        env["NETRC"] = str(workspace.render("netrc", "netrc", source, needed_by=f"{CONFIGURE} netrc"))


TARGETS: dict[str, Target] = {
    target.name: target for target in (Docker(), Git(), Pip(), Npm(), Maven(), Netrc())
}


def chosen(names: Iterable[str]) -> list[Target]:
    """The targets ``--configure`` names, each once, in the table's order; raises ConfigError."""
    wanted = set(names)
    unknown = sorted(wanted - {*TARGETS, ALL})
    if unknown:
        known = ", ".join((*TARGETS, ALL))
        raise ConfigError(f"{CONFIGURE}: {', '.join(unknown)} is not a target; choose from {known}")
    return [target for name, target in TARGETS.items() if ALL in wanted or name in wanted]


def _read_config(path: Path, variable: str) -> dict[str, Any]:
    """A client's JSON configuration file, or {} when there is none."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{CONFIGURE}: cannot read {path} ({exc}); fix the file, or point {variable} elsewhere"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{CONFIGURE}: {path} is not a JSON object; fix it, or point {variable} elsewhere")
    return data


def _merge(first: dict[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """``first`` with ``later``'s entries added where ``first`` has none (the earlier file wins)."""
    merged = {**later, **first}
    for key in ("auths", "credHelpers"):
        merged[key] = {**(later.get(key) or {}), **(first.get(key) or {})}
    return merged


def _containers_auth_chain(env: Mapping[str, str], home: Path, docker_file: Path) -> list[Path]:
    """The files podman, skopeo and buildah read credentials from, first first (containers-auth.json(5))."""
    if env.get("REGISTRY_AUTH_FILE"):
        return [Path(env["REGISTRY_AUTH_FILE"])]
    chain = []
    if env.get("XDG_RUNTIME_DIR"):
        chain.append(Path(env["XDG_RUNTIME_DIR"], "containers", "auth.json"))
    chain.append(Path(env.get("XDG_CONFIG_HOME") or home / ".config", "containers", "auth.json"))
    chain.append(docker_file)
    return chain


def _link_siblings(source: Path, private: Path, *, skip: str) -> None:
    """Link every entry of ``source`` but ``skip`` into ``private``: the client still finds them."""
    try:
        entries = list(os.scandir(source))
    except OSError:
        return  # no such directory: nothing to carry over
    for entry in entries:
        if entry.name != skip:
            (private / entry.name).symlink_to(Path(entry.path).resolve())
