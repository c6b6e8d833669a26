"""The injector's own settings, shared by ``tokenrelay inject`` and ``tokenrelay webhook``.

``OPTIONS`` holds them as ``options.Option`` rows, read by the same machine as ``tokenrelay run``'s
table: each is a flag with an environment variable derived from its name. The URLs take the same variables as
``tokenrelay run`` (``TOKENRELAY_AUTH_URL``, ``TOKENRELAY_API_URL``), since they are the values the
sidecar will get. docs/kubernetes.md's table of them is generated from ``OPTIONS``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

from .._version import __version__
from ..errors import ConfigError
from ..options import Option, add_options, read_options
from .mutation import Injector

DEFAULT_IMAGE = f"ghcr.io/example/tokenrelay:{__version__}"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(\.\d+)?([-+].*)?$")

OPTIONS: tuple[Option, ...] = (
    Option(
        "auth_url",
        "Token service base URL the sidecars use (their --auth-url; also the default audience of the "
        "projected token).",
        kind="url",
        required=True,
        metavar="URL",
    ),
    Option(
        "api_url",
        "API base URL the sidecars use (their --api-url).",
        kind="url",
        required=True,
        metavar="URL",
    ),
    Option("image", "The sidecar's image.", default=DEFAULT_IMAGE, metavar="IMAGE"),
    Option(
        "oidc_audience",
        "Audience of the projected service-account token (default: the --auth-url).",
        metavar="AUD",
    ),
    Option(
        "kube_version",
        "The cluster's Kubernetes version; below 1.29 (no native sidecars) every pod is refused. "
        "Unset: assumed recent enough (the webhook asks the API server).",
        metavar="X.Y",
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


def injector(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Injector:
    """The Injector from flags and environment, read by the options machine as every command's are;
    raises ConfigError naming the flag and variable."""
    given = read_options(OPTIONS, args, environ)
    version = None
    if given["kube_version"] is not None:
        version = parse_version(given["kube_version"])
        if version is None:
            raise ConfigError(
                f"{BY_NAME['kube_version'].where()}: {given['kube_version']!r} is not a version such as 1.30"
            )
    return Injector(
        auth_url=given["auth_url"],
        api_url=given["api_url"],
        image=given["image"],
        oidc_audience=given["oidc_audience"],
        kube_version=version,
    )


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a Kubernetes version string such as ``v1.30.2-eks-1234``, or None."""
    match = _VERSION.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None
