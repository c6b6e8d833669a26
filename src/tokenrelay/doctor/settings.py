"""Checks of ``tokenrelay run``'s settings, read as ``tokenrelay run`` reads them (``runsettings.load``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..lite import names
from ..sidecar import settings as runsettings
from ..sidecar.settings import Settings
from .report import Check, failed, passed, skipped, warning

REQUIRED = tuple(option for option in runsettings.OPTIONS if option.required)


def check(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[list[Check], Settings | None]:
    """The settings checks, and the Settings when they load."""
    try:
        settings = runsettings.load(args, environ)
    except ConfigError as exc:
        if not _anything_given(args, environ):
            return [
                skipped(
                    "config.parse",
                    "no sidecar settings here (--auth-url, --api-url, --identity or --config): "
                    "checking a running sidecar and the clients only",
                    "to check the exchange too, run the doctor with the same flags, TOKENRELAY_* "
                    "variables or --config as `tokenrelay run`",
                )
            ], None
        return [failed("config.parse", f"the settings do not load: {exc.message}", _fix_for(exc))], None
    checks = [
        passed(
            "config.parse",
            "settings load" + (f" (with --config {settings.config})" if settings.config else ""),
            authUrl=settings.auth_url,
            apiUrl=settings.api_url,
            identity=settings.identity,
            audiences=list(settings.audiences),
        )
    ]
    checks.extend(_urls(settings))
    checks.append(_identity(settings.identity))
    checks.extend(_audiences(settings))
    return checks, settings


def _anything_given(args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    if getattr(args, "config", None) or environ.get(names.ENV_PREFIX + "CONFIG"):
        return True
    return any(getattr(args, o.name, None) is not None or environ.get(o.env) for o in REQUIRED)


def _fix_for(exc: ConfigError) -> str:
    text = exc.message
    for option in runsettings.OPTIONS:
        if text.startswith(option.where()):
            return (
                f"set {option.flag} (env {option.env}, key {option.name!r} in the --config file) "
                f"to a valid value: {option.help}"
            )
    return "correct the setting the message names; docs/operations.md lists every one"


def _urls(settings: Settings) -> list[Check]:
    checks = []
    for flag, url in (("--auth-url", settings.auth_url), ("--api-url", settings.api_url)):
        parts = urlsplit(url)
        name = "config." + flag.strip("-").replace("-", "_")
        if parts.path not in ("", "/") and flag == "--auth-url" and parts.path.endswith("/sts/exchange"):
            checks.append(
                failed(
                    name,
                    f"{flag} {url} already ends in /sts/exchange: exchanges would go to {url}/sts/exchange",
                    f"give the token service's base: {flag} {url.removesuffix('/sts/exchange')}",
                )
            )
        elif parts.scheme == "http" and not _loopback(parts.hostname or ""):
            checks.append(
                warning(
                    name,
                    f"{flag} {url} is plain http to a host that is not loopback: tokens would cross "
                    "the network in the clear",
                    f"use https:// for {flag}",
                )
            )
        else:
            checks.append(passed(name, f"{flag} {url} is well-formed"))
    return checks


def _loopback(host: str) -> bool:
    from ..lite.netloc import is_loopback

    return is_loopback(host)


def _identity(uid: str) -> Check:
    problem = None
    if any(c.isspace() for c in uid) or not uid.isprintable():
        problem = "contains spaces or control characters"
    elif "://" in uid:
        problem = "is a URL, not a uid (the claimMatch issuer belongs to the identity, not to --identity)"
    elif uid.startswith("/") or uid.endswith("/") or "//" in uid:
        problem = "has an empty path segment"
    if problem is not None:
        return failed(
            "config.identity",
            f"--identity {uid!r} {problem}",
            "set --identity (env TOKENRELAY_IDENTITY) to the assumable identity's uid as the API "
            "shows it (GET /iam/v2beta1/identities/...: the `uid` field)",
        )
    return passed("config.identity", f"--identity {uid} is well-formed")


def _audiences(settings: Settings) -> list[Check]:
    bad = [aud for aud in settings.audience if any(c.isspace() for c in aud) or "," in aud]
    if bad:
        return [
            failed(
                "config.audiences",
                f"--audience {bad[0]!r} contains spaces or commas",
                "give one audience per --audience flag (or comma-separated in TOKENRELAY_AUDIENCE)",
            )
        ]
    return [passed("config.audiences", "audiences: " + ", ".join(settings.audiences))]
