"""The injector's own settings, shared by ``tokenrelay inject`` and ``tokenrelay webhook``.

``OPTIONS`` holds them as ``config.Option`` rows, as ``tokenrelay run``'s table does: each is a flag
with an environment variable derived from its name. The URLs take the same variables as
``tokenrelay run`` (``TOKENRELAY_AUTH_URL``, ``TOKENRELAY_API_URL``), since they are the values the
sidecar will get. docs/kubernetes.md's table of them is generated from ``OPTIONS``.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from .._version import __version__
from ..errors import ConfigError
from ..options import Option, add_options
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


def value(option: Option, args: argparse.Namespace, env: Mapping[str, str]) -> Any:
    """The flag's value, else the variable's (when the option has one), else the default; strings
    stripped, and an empty one taken as not given."""
    given = getattr(args, option.name, None)
    if isinstance(given, str):
        given = given.strip() or None
    if given is None and option.variable is not None:
        given = env.get(option.env, "").strip() or None
    return option.default if given is None else given


def values(
    options: Sequence[Option], args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    return {option.name: value(option, args, env) for option in options}


def injector(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Injector:
    """The Injector from flags and environment; raises ConfigError naming the flag and variable."""
    given = values(OPTIONS, args, environ)
    for option in OPTIONS:
        text = given[option.name]
        if text is None and option.required:
            raise ConfigError(f"{option.where()} is required: the sidecars' {option.name.replace('_', ' ')}")
        if option.kind == "url":
            given[option.name] = _url(option, text)
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


def _url(option: Option, text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"{option.where()}: {text!r} is not an http:// or https:// URL")
    return text.rstrip("/")


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a Kubernetes version string such as ``v1.30.2-eks-1234``, or None."""
    match = _VERSION.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None
