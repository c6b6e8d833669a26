"""How docker, and podman / skopeo / buildah, will really find credentials for each configured host.

The docker CLI reads one file: ``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``; for a
host it asks ``credHelpers[host]``, else the ``credsStore``, else uses a stored ``auths`` entry.
podman, skopeo and buildah (containers/image, ``pkg/docker/config``) read several files in turn until
one yields a credential: ``$REGISTRY_AUTH_FILE`` (else ``$XDG_RUNTIME_DIR/containers/auth.json``, else
``/run/containers/<uid>/auth.json``), ``$XDG_CONFIG_HOME/containers/auth.json`` (``~/.config/...``),
``$DOCKER_CONFIG/config.json`` (else ``~/.docker/config.json``), ``~/.dockercfg``; in each file
``credHelpers[host]`` comes before ``auths``, and ``credsStore`` is not read at all. Those files are
one entry (``containers-auth.json``) of registries.conf's ``credential-helpers`` list, the default
and only entry unless someone set it.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..helpers.hosts import Host
from .report import Check, failed, passed, skipped, warning

OURS = "tokenrelay"
# Docker Hub's credentials live under docker's historical index address.
_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io")


@dataclass(frozen=True, slots=True)
class ConfigFile:
    path: Path
    content: dict[str, Any] | None  # None: not there
    error: str | None = None


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def docker_path(environ: Mapping[str, str]) -> Path:
    if environ.get("DOCKER_CONFIG"):
        return Path(environ["DOCKER_CONFIG"]) / "config.json"
    return _home(environ) / ".docker" / "config.json"


def containers_paths(environ: Mapping[str, str], uid: int | None = None) -> list[Path]:
    """containers/image's getAuthFilePaths, in its order (the legacy ~/.dockercfg last)."""
    home = _home(environ)
    if environ.get("REGISTRY_AUTH_FILE"):
        primary = Path(environ["REGISTRY_AUTH_FILE"])
    elif environ.get("XDG_RUNTIME_DIR"):
        primary = Path(environ["XDG_RUNTIME_DIR"]) / "containers" / "auth.json"
    else:
        primary = Path(f"/run/containers/{os.geteuid() if uid is None else uid}/auth.json")
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    return [primary, config_home / "containers" / "auth.json", docker_path(environ), home / ".dockercfg"]


def read(path: Path) -> ConfigFile:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ConfigFile(path, None)
    except OSError as exc:
        return ConfigFile(path, None, f"cannot read {path}: {exc.strerror or exc}")
    try:
        content = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        return ConfigFile(path, None, f"{path} is not valid JSON: {exc}")
    if not isinstance(content, dict):
        return ConfigFile(path, None, f"{path} does not hold a JSON object")
    return ConfigFile(path, content)


def _keys(host: Host) -> tuple[str, ...]:
    hub = host.name in ("docker.io", "index.docker.io", "registry-1.docker.io")
    return _HUB_KEYS if hub else (host.netloc,)


def _helper(content: Mapping[str, Any], host: Host) -> str | None:
    helpers = content.get("credHelpers")
    if not isinstance(helpers, dict):
        return None
    for key in _keys(host):
        if isinstance(helpers.get(key), str):
            return str(helpers[key])
    return None


def _stored(content: Mapping[str, Any], host: Host) -> str | None:
    """The ``auths`` key holding a stored login for ``host`` (or a repository on it), if any."""
    auths = content.get("auths")
    if not isinstance(auths, dict):
        return None
    for key in auths:
        bare = str(key).removeprefix("https://").removeprefix("http://")
        for want in _keys(host):
            want = want.removeprefix("https://").rstrip("/")
            if bare.rstrip("/") == want or bare.startswith(want + "/"):
                return str(key)
    return None


def _helper_fix(path: Path, host: Host) -> str:
    return f'set "credHelpers": {{"{_keys(host)[0]}": "{OURS}"}} in {path}'


def docker(host: Host, environ: Mapping[str, str]) -> Check:
    name = f"clients.docker.{host.netloc}"
    config = read(docker_path(environ))
    if config.error is not None:
        return failed(name, f"docker cannot use its config: {config.error}", f"repair {config.path}")
    content = config.content or {}
    helper = _helper(content, host)
    store = content.get("credsStore")
    where = str(config.path)
    if helper == OURS or (helper is None and store == OURS):
        via = "credHelpers" if helper else "credsStore"
        return _on_path(name, f"docker asks tokenrelay for {host.netloc} ({via} in {where})", environ)
    if helper is not None:
        return failed(
            name,
            f"docker asks docker-credential-{helper} for {host.netloc} (credHelpers in {where}), "
            "not tokenrelay",
            _helper_fix(config.path, host),
        )
    if isinstance(store, str) and store:
        return failed(
            name,
            f"docker asks its credsStore docker-credential-{store} for {host.netloc} ({where}), not "
            "tokenrelay",
            _helper_fix(config.path, host) + " (credHelpers beats credsStore for that host)",
        )
    stored = _stored(content, host)
    if stored is not None:
        return failed(
            name,
            f"docker sends the login stored under auths[{stored!r}] in {where} to {host.netloc}, "
            "not tokenrelay's token",
            f"docker logout {host.netloc}, then " + _helper_fix(config.path, host),
        )
    return skipped(
        name,
        f"docker is not set up to ask tokenrelay for {host.netloc} ({where}); it pulls anonymously",
        "if it is a registry: " + _helper_fix(config.path, host),
    )


AUTH_FILES = "containers-auth.json"  # registries.conf's name for "the auth files, in their order"
SYSTEM_REGISTRIES_CONF = Path("/etc/containers/registries.conf")


def credential_helpers(environ: Mapping[str, str]) -> tuple[list[str], str]:
    """registries.conf's ``credential-helpers`` and the file that set it (the last one read does):
    ``$CONTAINERS_REGISTRIES_CONF``, else ``~/.config/containers/registries.conf`` if it exists, else
    the system's, then the ``registries.conf.d`` drop-ins in name order."""
    config_home = Path(environ.get("XDG_CONFIG_HOME") or _home(environ) / ".config") / "containers"
    if environ.get("CONTAINERS_REGISTRIES_CONF"):
        files = [Path(environ["CONTAINERS_REGISTRIES_CONF"])]
    else:
        user = config_home / "registries.conf"
        files = [user if user.exists() else SYSTEM_REGISTRIES_CONF]
        for directory in (SYSTEM_REGISTRIES_CONF.with_suffix(".conf.d"), config_home / "registries.conf.d"):
            files.extend(sorted(directory.glob("*.conf")) if directory.is_dir() else [])
    helpers, source = [AUTH_FILES], "the default"
    for path in files:
        try:
            value = tomllib.loads(path.read_text()).get("credential-helpers")
        except (OSError, ValueError):
            continue  # podman reports a broken registries.conf itself, loudly
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            helpers, source = list(value), str(path)
    return helpers, source


def containers(host: Host, environ: Mapping[str, str]) -> Check:
    name = f"clients.podman.{host.netloc}"
    helpers, source = credential_helpers(environ)
    if AUTH_FILES not in helpers and OURS not in helpers:
        return failed(
            name,
            f"credential-helpers in {source} leaves out {AUTH_FILES}: podman/skopeo/buildah never read "
            "their auth files' credHelpers",
            f'add "{AUTH_FILES}" or "{OURS}" to credential-helpers in {source}',
        )
    for helper in helpers:
        if helper == OURS:
            return _on_path(
                name,
                f"podman/skopeo/buildah ask tokenrelay for {host.netloc} (credential-helpers in {source})",
                environ,
            )
        if helper != AUTH_FILES:
            return warning(
                name,
                f"podman/skopeo/buildah ask docker-credential-{helper} (credential-helpers in {source}) for "
                f"{host.netloc} before anything else; what it holds for the host wins",
                f'put "{AUTH_FILES}" (or "{OURS}") first in credential-helpers in {source}',
            )
        found = _auth_files(name, host, environ)
        if found is not None:
            return found
    existing = [str(path) for path in containers_paths(environ) if path.exists()]
    files = ", ".join(existing) if existing else "none of their auth files exists"
    return skipped(
        name,
        f"podman/skopeo/buildah are not set up to ask tokenrelay for {host.netloc} ({files})",
        "if it is a registry: " + _helper_fix(docker_path(environ), host) + " (they read it too)",
    )


def _auth_files(name: str, host: Host, environ: Mapping[str, str]) -> Check | None:
    """The verdict of the first auth file that speaks for ``host``; None when none does."""
    paths = containers_paths(environ)
    for index, path in enumerate(paths):
        config = read(path)
        if config.error is not None:
            return failed(name, f"podman/skopeo/buildah stop at {config.error}", f"repair or remove {path}")
        if config.content is None:
            continue
        helper = _helper(config.content, host)
        if helper == OURS:
            return _on_path(name, f"podman/skopeo/buildah ask tokenrelay for {host.netloc} ({path})", environ)
        if helper is not None:
            return failed(
                name,
                f"podman/skopeo/buildah ask docker-credential-{helper} for {host.netloc} "
                f"(credHelpers in {path}), before any tokenrelay entry",
                _helper_fix(path, host),
            )
        stored = _stored(config.content, host)
        if stored is not None:
            return failed(
                name,
                f"podman/skopeo/buildah send the login stored under auths[{stored!r}] in {path} to "
                f"{host.netloc}, before asking tokenrelay",
                f"podman logout --authfile {path} {host.netloc}"
                + ("" if _ours_later(paths[index + 1 :], host) else ", then " + _helper_fix(path, host)),
            )
    return None


def _ours_later(paths: list[Path], host: Host) -> bool:
    """True when a later auth file names tokenrelay for ``host``, so removing the login is enough."""
    for path in paths:
        content = read(path).content
        if content is not None and (helper := _helper(content, host)) is not None:
            return helper == OURS
    return False


def _on_path(name: str, message: str, environ: Mapping[str, str]) -> Check:
    if shutil.which("docker-credential-tokenrelay", path=environ.get("PATH")) is None:
        return failed(
            name,
            message + ", but docker-credential-tokenrelay is not on PATH",
            "install tokenrelay where the client runs (pip install tokenrelay) and put its bin "
            "directory on PATH",
        )
    return passed(name, message)
