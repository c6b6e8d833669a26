"""Checks of the token service: reachable, its TLS certificate valid, its clock, and one real exchange
per audience, a refusal explained in the service's own words next to the OIDC token's claims."""

from __future__ import annotations

import io
import netrc
import os
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from yarl import URL

from ..errors import ExchangeError
from ..lite import aip193
from ..lite.jwtclaims import numeric_claim, unverified_claims
from ..lite.redact import fingerprint, scrub
from ..lite.regularfile import NotRegularFile, read_regular
from ..lite.stsanswer import http_date
from ..lite.timestamps import format_timestamp
from ..lite.unreachable import unreachable_text
from ..sidecar.settings import Settings
from ..tokens import sts
from .oidc import OidcToken, expected_audience
from .report import Check, failed, passed, skipped, warning

SKEW_WARN = 30.0  # seconds; an OIDC token's iat/nbf checks usually allow about a minute
SKEW_FAIL = 300.0
MAX_ERROR_WORDS = 300  # characters of an internal error's own message quoted
MAX_NETRC = 1 << 20  # bytes; a .netrc is a few lines


def ca_in_use(environ: Mapping[str, str] = os.environ) -> str:
    """Which CAs an https exchange trusts: the system's, as OpenSSL finds them (SSL_CERT_FILE/_DIR)."""
    paths = ssl.get_default_verify_paths()
    if environ.get("SSL_CERT_FILE"):
        return f"SSL_CERT_FILE={environ['SSL_CERT_FILE']}"
    if environ.get("SSL_CERT_DIR"):
        return f"SSL_CERT_DIR={environ['SSL_CERT_DIR']}"
    return f"the system CAs ({paths.cafile or paths.capath or 'OpenSSL default'})"


async def reach(
    settings: Settings,
    session: aiohttp.ClientSession,
    environ: Mapping[str, str],
    wall: Callable[[], float] = time.time,
) -> list[Check]:
    """``service.reach``, ``service.tls`` and ``service.clock`` from one unauthenticated request."""
    url = sts.exchange_url(settings.auth_url)
    https = url.startswith("https://")
    ca = ca_in_use(environ)
    sent = wall()
    try:
        async with session.get(
            url,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=settings.exchange_timeout),
        ) as response:
            status, date = response.status, response.headers.get("Date")
    except aiohttp.ClientConnectorCertificateError as exc:
        return [
            passed("service.reach", f"the token service at {url} answers TCP"),
            failed(
                "service.tls",
                f"the token service's certificate does not verify against {ca}: "
                f"{scrub(str(exc.certificate_error))}",
                "install the CA that signed the token service's certificate in the system store, or "
                "point SSL_CERT_FILE at a PEM bundle holding it (tokenrelay trusts the system CAs "
                "for the exchange); check --auth-url names the host on the certificate",
            ),
        ]
    except (aiohttp.ClientError, TimeoutError) as exc:
        if isinstance(exc, TimeoutError):
            message = f"the token service at {url} did not answer within --exchange-timeout"
        else:
            message = unreachable_text(url, exc)
        return [
            failed(
                "service.reach",
                message,
                "check --auth-url (env TOKENRELAY_AUTH_URL), DNS, egress rules and proxy variables "
                "(HTTP_PROXY, HTTPS_PROXY and NO_PROXY are honoured)",
            )
        ]
    received = wall()
    checks = [passed("service.reach", f"the token service at {url} answers (HTTP {status} without a token)")]
    if https:
        checks.append(passed("service.tls", f"its TLS certificate verifies against {ca}"))
    else:
        checks.append(skipped("service.tls", "plain http: no certificate to check"))
    server = http_date(date)
    if server is None:
        checks.append(skipped("service.clock", "the token service sent no Date header"))
        return checks
    # Date has one-second resolution and is stamped somewhere between sending and receiving.
    skew = server + 0.5 - (sent + received) / 2
    text = f"this host's clock is {abs(skew):.0f}s {'behind' if skew > 0 else 'ahead of'} the token service's"
    if abs(skew) >= SKEW_FAIL:
        checks.append(failed("service.clock", text, _clock_fix(), skewSeconds=round(skew, 1)))
    elif abs(skew) >= SKEW_WARN:
        checks.append(warning("service.clock", text, _clock_fix(), skewSeconds=round(skew, 1)))
    else:
        checks.append(passed("service.clock", text, skewSeconds=round(skew, 1)))
    return checks


def _clock_fix() -> str:
    return (
        "synchronise this host's clock (NTP: chronyd, systemd-timesyncd); OIDC tokens are judged "
        "by their iat, nbf and exp on the token service's clock"
    )


async def exchanges(
    settings: Settings,
    session: aiohttp.ClientSession,
    token: OidcToken,
    audiences: tuple[str, ...],
    environ: Mapping[str, str] = os.environ,
) -> list[Check]:
    """One real exchange per audience."""
    checks = []
    for number, audience in enumerate(audiences):
        name = f"service.exchange.{number}"
        try:
            issued = await sts.exchange(
                session,
                settings.auth_url,
                audience,
                settings.identity,
                token.value,
                timeout=settings.exchange_timeout,
            )
        except ExchangeError as exc:
            checks.append(_refused(name, audience, settings, token, exc))
            continue
        except Exception as exc:  # a bug, or something in this host's setup aiohttp trips on
            checks.extend(_crashed(name, audience, settings, exc, environ))
            continue
        claims = unverified_claims(issued.token) or {}
        exp = numeric_claim(claims, "exp") or issued.expiry
        until = f", expires {format_timestamp(exp)}" if exp is not None else ""
        checks.append(
            passed(
                name,
                f"exchange for audience {audience} works: token {fingerprint(issued.token)}{until}",
                audience=audience,
                fingerprint=fingerprint(issued.token),
            )
        )
    return checks


def netrc_check(host: str, environ: Mapping[str, str]) -> Check | None:
    """A warning when the .netrc that HTTP clients read (NETRC, else ~/.netrc) gives ``host``
    credentials, or is no regular file of a credentials file's size (read bounded and without
    blocking: a FIFO there would hang the doctor); None when it is absent, unreadable or harmless."""
    named = environ.get("NETRC")
    path = Path(named) if named else Path(environ.get("HOME") or Path.home()) / ".netrc"
    where = f"NETRC={path}" if named else str(path)
    fix = (
        "point NETRC at a regular file, or unset it" if named else f"make {path} a regular file or remove it"
    )
    try:
        raw = read_regular(str(path), MAX_NETRC)
    except FileNotFoundError:
        return None
    except (IsADirectoryError, NotRegularFile) as exc:
        kind = exc.kind if isinstance(exc, NotRegularFile) else "a directory"
        return warning(
            "service.netrc",
            f"{where} is {kind}, not a regular file: the doctor did not read it, and an HTTP client "
            "that reads .netrc may hang on it or fail",
            fix,
        )
    except OSError:
        return None  # no client can read it either, so none adds its credentials
    if len(raw) > MAX_NETRC:
        return warning(
            "service.netrc", f"{where} is over 1 MiB, too big to be a .netrc: the doctor did not read it", fix
        )
    entry = _netrc_entry(host, raw, str(path))
    if entry is None:
        return None
    return warning(
        "service.netrc",
        f"{where} has {entry} for the token service's host {host}: an HTTP client that reads .netrc "
        "adds its credentials to every request there, the exchange's included",
        f"take {host} (and any default entry) out of that file, or point NETRC at one without it",
    )


def _netrc_entry(host: str, raw: bytes, path: str) -> str | None:
    """Which entry of the .netrc text ``raw`` gives ``host`` credentials: "a machine entry", "a
    default entry", or None (none does, or it does not parse, so clients ignore it too)."""
    parsed = netrc.netrc.__new__(netrc.netrc)
    parsed.hosts, parsed.macros = {}, {}
    try:
        # the stdlib's parser, fed the bytes read here: netrc.netrc(path) opens the path itself
        parsed._parse(path, io.StringIO(raw.decode("utf-8", "replace")), False)  # type: ignore[attr-defined]
    except netrc.NetrcParseError:
        return None
    if host in parsed.hosts:
        return "a machine entry"
    if "default" in parsed.hosts:
        return "a default entry"
    return None


def _crashed(
    name: str, audience: str, settings: Settings, exc: Exception, environ: Mapping[str, str]
) -> list[Check]:
    """The exchange's internal error in its own words (scrubbed), and a ``.netrc`` that names the
    token service's host: aiohttp sessions that trust the environment add its Basic credentials."""
    words = " ".join(scrub(str(exc)).split())[:MAX_ERROR_WORDS]
    checks = [
        failed(
            name,
            f"exchange for audience {audience} stopped on an internal error: {type(exc).__name__}"
            + (f": {words}" if words else ""),
            "this is a bug in tokenrelay or a clash with this host's setup: please report it with this line",
            audience=audience,
            error=type(exc).__name__,
        )
    ]
    host = URL(settings.auth_url).host
    netrc_warning = netrc_check(host, environ) if host else None
    if netrc_warning is not None:
        checks.append(netrc_warning)
    return checks


def _refused(name: str, audience: str, settings: Settings, token: OidcToken, exc: ExchangeError) -> Check:
    claims = token.claims or {}
    iss, sub, aud, exp = claims.get("iss"), claims.get("sub"), claims.get("aud"), claims.get("exp")
    seen = f"the OIDC token says iss={iss}, sub={sub}, aud={aud}, exp={exp} (unverified)"
    code = exc.code
    details: dict[str, Any] = {"audience": audience, "status": exc.status, "code": code, "reason": exc.reason}
    if code == aip193.Code.PERMISSION_DENIED or (code is None and exc.status == 403):
        fix = (
            f"the identity {settings.identity} matches tokens by its claimMatch, and this token's issuer "
            f"or subject is not the one it names. Make its claimMatch exactly "
            f'{{"issuer": "{iss}", "subject": "{sub}"}} (PATCH the identity), or set --identity '
            "(env TOKENRELAY_IDENTITY) to the identity whose claimMatch names them"
        )
        if token.kubernetes is not None:
            fix += (
                f"; for the kubelet credential provider, annotate the service account {token.kubernetes} "
                "with tokenrelay.dev/identity: <the uid of an identity whose claimMatch names it>"
            )
    elif code == aip193.Code.UNAUTHENTICATED or (code is None and exc.status == 401):
        fix = (
            f"the token service does not accept the OIDC token itself: its issuer {iss} must be one the "
            "token service trusts, the token signed by that issuer's published key and unexpired, "
            f"and (by convention) its audience {expected_audience(settings)}"
        )
    elif code == aip193.Code.NOT_FOUND or (code is None and exc.status == 404):
        fix = (
            f"--identity {settings.identity} (env TOKENRELAY_IDENTITY) names no identity the token "
            "service knows: copy the identity's uid from the API"
        )
    elif code == aip193.Code.INVALID_ARGUMENT or (code is None and exc.status == 400):
        fix = f"check --identity (env TOKENRELAY_IDENTITY) and the audience {audience} (--audience)"
    elif exc.status is not None and 300 <= exc.status < 400:
        fix = "set --auth-url (env TOKENRELAY_AUTH_URL) to the address the redirect names"
    else:
        fix = "the token service is failing or unreachable: check its health, then run the doctor again"
    return failed(name, f"exchange for audience {audience} refused: {exc.message}; {seen}", fix, **details)
