"""The injector's own settings, shared by ``tokenrelay inject`` and ``tokenrelay webhook``.

Each is a flag with an environment variable; the URLs take the same variables as ``tokenrelay run``
(``TOKENRELAY_AUTH_URL``, ``TOKENRELAY_API_URL``), since they are the values the sidecar will get.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from .._version import __version__
from ..errors import ConfigError
from .mutation import Injector

DEFAULT_IMAGE = f"ghcr.io/example/tokenrelay:{__version__}"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(\.\d+)?([-+].*)?$")

# dest, flag, env, metavar, help
_FLAGS = (
    (
        "auth_url",
        "--auth-url",
        "TOKENRELAY_AUTH_URL",
        "URL",
        "token service base URL the sidecars use (required)",
    ),
    ("api_url", "--api-url", "TOKENRELAY_API_URL", "URL", "API base URL the sidecars use (required)"),
    ("image", "--image", "TOKENRELAY_IMAGE", "IMAGE", f"the sidecar's image (default {DEFAULT_IMAGE})"),
    (
        "oidc_audience",
        "--oidc-audience",
        "TOKENRELAY_OIDC_AUDIENCE",
        "AUD",
        "audience of the projected service-account token (default: the --auth-url)",
    ),
    (
        "kube_version",
        "--kube-version",
        "TOKENRELAY_KUBE_VERSION",
        "X.Y",
        "the cluster's Kubernetes version; below 1.29 (no native sidecars) every pod is refused",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for dest, flag, env, metavar, help_text in _FLAGS:
        parser.add_argument(flag, dest=dest, metavar=metavar, help=f"{help_text} [env {env}]")


def injector(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Injector:
    """The Injector from flags and environment; raises ConfigError naming the flag and variable."""
    env = os.environ if environ is None else environ
    values: dict[str, str | None] = {}
    for dest, _flag, variable, _, _ in _FLAGS:
        value = getattr(args, dest, None) or env.get(variable) or None
        values[dest] = value.strip() if value else None
    for dest, flag, variable, _, _ in _FLAGS[:2]:
        value = values[dest]
        if value is None:
            raise ConfigError(f"{flag} (env {variable}) is required: the sidecars' {dest.replace('_', ' ')}")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ConfigError(f"{flag} (env {variable}): {value!r} is not an http:// or https:// URL")
        values[dest] = value.rstrip("/")
    version = None
    if values["kube_version"]:
        version = parse_version(values["kube_version"])
        if version is None:
            raise ConfigError(
                f"--kube-version (env TOKENRELAY_KUBE_VERSION): {values['kube_version']!r} is not a "
                "version such as 1.30"
            )
    assert values["auth_url"] is not None
    assert values["api_url"] is not None
    return Injector(
        auth_url=values["auth_url"],
        api_url=values["api_url"],
        image=values["image"] or DEFAULT_IMAGE,
        oidc_audience=values["oidc_audience"],
        kube_version=version,
    )


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a Kubernetes version string such as ``v1.30.2-eks-1234``, or None."""
    match = _VERSION.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None
