"""How long a token lives and when it is refreshed: every number of that policy, written once.

The provider schedules refreshes with these, the credential helpers and the kubelet provider cache
by them, and the emulator states its tokens' lives with them. Standard library only, and no
``typing``: the credential helpers import this module.
"""

from __future__ import annotations

from .jwtclaims import numeric_claim, unverified_claims

# The upstream's documented lifetime, used only when neither the token nor the service says.
DEFAULT_LIFETIME = 3600.0
# Below this much remaining life a token is not handed out: the caller could not finish a request.
# Short-lived tokens (tests, the emulator's --token-lifetime) get a tenth of their life instead.
MIN_USEFUL_SECONDS = 10.0
# A token is replaced at REFRESH_FRACTION of its life, less up to JITTER of that (so a fleet started
# together does not refresh together).
REFRESH_FRACTION = 0.5
JITTER = 0.1
# The earliest point of its life at which the sidecar may replace a token: whoever caches a token
# the sidecar gave (kubelet) must let go of it by then.
EARLIEST_REFRESH = REFRESH_FRACTION * (1 - JITTER)


def usable_margin(lifetime: float) -> float:
    """Seconds before its expiry at which a token of ``lifetime`` stops being handed out."""
    return min(MIN_USEFUL_SECONDS, lifetime / 10)


def lifetime_of(token: str, stated: float | None, now: float, server_time: float | None = None) -> float:
    """Seconds of life ``token`` has left, read from the token itself.

    ``exp`` measured on the issuer's own clock (its ``Date``, ``server_time``, else the token's
    ``iat``, else ``now``) and never more than ``exp - iat``, so that a skew between us and the issuer
    changes nothing; else the service's stated expiry (Unix time); else DEFAULT_LIFETIME.
    """
    claims = unverified_claims(token)
    exp = numeric_claim(claims, "exp") if claims else None
    if exp is not None:
        iat = numeric_claim(claims, "iat") if claims else None
        if iat is None:
            return exp - (now if server_time is None else server_time)
        return min(exp - (iat if server_time is None else server_time), exp - iat)
    if stated is not None:
        return stated - (now if server_time is None else server_time)
    return DEFAULT_LIFETIME
