"""Checks of the platform's OIDC token: present, readable, a JWT, alive, for the right audience.

The claims are decoded without checking the signature: only the token service can check it (and
does, at the exchange below), so every line here says "unverified".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ..errors import ConfigError, IdTokenError
from ..lite.jwtclaims import numeric_claim, unverified_claims
from ..lite.redact import fingerprint
from ..lite.timestamps import format_timestamp
from ..sidecar.daemon import id_token_source
from ..sidecar.settings import Settings
from ..tokens.idsources import SOURCES, Source, unsaid
from .report import Check, failed, passed, skipped, warning

# kubelet replaces a projected token once 80% of its life has passed: a token older than that in
# the file means nobody is renewing it.
RENEWED_AT = 0.8


@dataclass(frozen=True, slots=True)
class OidcToken:
    """The OIDC token as read, and its unverified claims (None when it is not a JWT)."""

    value: str = field(repr=False)
    claims: dict[str, Any] | None

    @property
    def kubernetes(self) -> str | None:
        """``namespace/name`` of the service account of a Kubernetes token, else None."""
        if self.claims is None or not _is_kubernetes(self.claims):
            return None
        namespace, name, _ = _service_account(self.claims)
        return f"{namespace}/{name}"


def _never(_: object = None) -> float:
    return 0.0  # a wall clock at 1970: the reader never refuses for expiry, we report it ourselves


async def check(
    settings: Settings,
    environ: Mapping[str, str],
    session: aiohttp.ClientSession,
    wall: Callable[[], float] = time.time,
) -> tuple[list[Check], OidcToken | None]:
    try:
        reader = id_token_source(settings, session, environ, wall=_never)
    except ConfigError as exc:
        chosen = SOURCES[settings.id_token_source]
        return [failed("oidc.read", exc.message, chosen.missing() or chosen.setup)], None
    try:
        value = (await reader.read()).value
    except IdTokenError as exc:
        return [failed("oidc.read", unsaid(reader, exc.message), reader.fix())], None
    where = reader.description
    claims = unverified_claims(value)
    token = OidcToken(value, claims)
    checks = [
        _chosen(settings, reader),
        passed("oidc.read", f"read the OIDC token from {where}", fingerprint=fingerprint(value)),
    ]
    if claims is None:
        checks.append(
            failed(
                "oidc.jwt",
                f"the OIDC token in {where} is not a JWT (three base64url parts joined by dots)",
                reader.fix(),
            )
        )
        return checks, token
    shown = {name: claims.get(name) for name in ("iss", "sub", "aud", "iat", "exp") if name in claims}
    checks.append(
        passed(
            "oidc.jwt",
            "a JWT (signature not checked here: the token service checks it): "
            + ", ".join(f"{name}={_claim(name, value)}" for name, value in shown.items()),
            claims=shown,
        )
    )
    checks.append(_expiry(claims, reader, wall()))
    checks.append(_lifetime(claims, reader, wall()))
    checks.append(_audience(claims, settings, reader))
    checks.append(_kubernetes(claims))
    return checks, token


def _chosen(settings: Settings, reader: Source) -> Check:
    """Which source reads the token, why that one, and whether it can mint another."""
    chosen, detected = reader.choice()
    why = detected or f"--id-token-source {settings.id_token_source}"
    if reader.mints:
        kind = f"mints a new token for {expected_audience(settings)} at every exchange"
    elif reader.fixed:
        kind = "hands out the token the platform set once for the job: exchanges work only while it lives"
    else:
        kind = "re-reads the token at every exchange; the platform renews it"
    return passed(
        "oidc.source",
        f"the {chosen.name} source ({why}) {kind}",
        source=chosen.name,
        why=why,
        mints=reader.mints,
        fixed=reader.fixed,
    )


def _lifetime(claims: dict[str, Any], reader: Source, now: float) -> Check:
    """A token that cannot be minted anew must outlive the job."""
    if not reader.fixed:
        return skipped("oidc.lifetime", "a fresh token is at hand at every exchange")
    short = reader.shortfall(numeric_claim(claims, "exp"), now)
    if short is None:
        return passed("oidc.lifetime", "the OIDC token outlives the job as far as the platform tells")
    return warning(
        "oidc.lifetime",
        short,
        "use the platform's minting source where it has one (the CLI or endpoint: see docs/platforms/), "
        "or give the token a lifetime as long as the job",
    )


def _claim(name: str, value: Any) -> str:
    if name in ("iat", "exp") and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return format_timestamp(value)
        except (ValueError, OverflowError, OSError):
            return str(value)
    return str(value)


def _expiry(claims: dict[str, Any], reader: Source, now: float) -> Check:
    exp, iat = numeric_claim(claims, "exp"), numeric_claim(claims, "iat")
    if exp is None:
        return warning(
            "oidc.expiry",
            "the OIDC token has no exp claim: the token service will likely refuse it",
            reader.fix(),
        )
    renew = reader.renewal()
    when = _claim("exp", exp)
    if exp <= now:
        return failed("oidc.expiry", f"the OIDC token expired at {when}, {now - exp:.0f}s ago", renew)
    left = exp - now
    if iat is not None and exp > iat and (now - iat) > RENEWED_AT * (exp - iat) + 1:
        return warning(
            "oidc.expiry",
            f"the OIDC token expires at {when}, in {left:.0f}s: past 80% of its life, when it "
            "should have been replaced",
            renew,
        )
    if iat is not None and iat > now + 60:
        return warning(
            "oidc.expiry",
            f"the OIDC token was issued at {_claim('iat', iat)}, {iat - now:.0f}s in the future: "
            "this host's clock is behind its issuer's",
            "fix the clock (NTP) on this host",
        )
    return passed("oidc.expiry", f"the OIDC token expires at {when}, in {left:.0f}s", expiresIn=round(left))


def expected_audience(settings: Settings) -> str:
    """The audience the token service expects of an OIDC token: the --auth-url, by convention
    (kubelet's ``serviceAccountTokenAudience``, GitHub's default), unless --id-token-audience says."""
    return settings.id_token_audience or settings.auth_url


def _audience(claims: dict[str, Any], settings: Settings, reader: Source) -> Check:
    want = expected_audience(settings).rstrip("/")
    aud = claims.get("aud")
    listed = aud if isinstance(aud, list) else [aud]
    auds = [a for a in listed if isinstance(a, str)]
    if any(a.rstrip("/") == want for a in auds):
        return passed("oidc.audience", f"the OIDC token's audience is the token service's ({want})")
    if reader.mints:
        fix = f"request the token for {want}: --id-token-audience {want} (env TOKENRELAY_ID_TOKEN_AUDIENCE)"
    elif _is_kubernetes(claims):
        fix = (
            "set the projected volume's `serviceAccountToken: {audience: " + want + ", ...}` in the "
            "pod spec (the audience kubelet mints the token for)"
        )
    else:
        fix = f"have the platform issue the OIDC token for the audience {want}"
    return warning(
        "oidc.audience",
        f"the OIDC token's audience is {aud!r}, not the token service's {want!r}; the token service "
        "may refuse it",
        fix,
        aud=aud,
        expected=want,
    )


def _is_kubernetes(claims: dict[str, Any]) -> bool:
    sub = claims.get("sub")
    return isinstance(claims.get("kubernetes.io"), dict) or (
        isinstance(sub, str) and sub.startswith("system:serviceaccount:")
    )


def _kubernetes(claims: dict[str, Any]) -> Check:
    if not _is_kubernetes(claims):
        return skipped("oidc.kubernetes", "not a Kubernetes service-account token")
    namespace, name, pod = _service_account(claims)
    where = f" (pod {pod})" if pod else ""
    return passed(
        "oidc.kubernetes",
        f"a Kubernetes token of service account {namespace}/{name}{where}",
        namespace=namespace,
        serviceAccount=name,
        pod=pod,
    )


def _service_account(claims: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(namespace, service account, pod) from the ``kubernetes.io`` claim, else from ``sub``."""
    k8s = claims.get("kubernetes.io")
    namespace = name = pod = None
    if isinstance(k8s, dict):
        namespace = k8s.get("namespace")
        account = k8s.get("serviceaccount")
        name = account.get("name") if isinstance(account, dict) else None
        pod_claim = k8s.get("pod")
        pod = pod_claim.get("name") if isinstance(pod_claim, dict) else None
    sub = claims.get("sub")
    if (namespace is None or name is None) and isinstance(sub, str):
        parts = sub.split(":")
        if len(parts) == 4:
            namespace, name = parts[2], parts[3]
    return namespace, name, pod
