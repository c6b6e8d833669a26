"""How secrets appear in logs, errors and reprs: never in the clear.

A log line names a token by a short fingerprint (the first 8 hex digits of its SHA-256), enough to
tell two tokens apart when debugging rotation, useless to an attacker.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

REDACTED = "[secure]"

# httpx's SENSITIVE_HEADERS, plus the cookie pair: values shown as [secure] wherever headers are logged.
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})

# A compact JWS (three base64url segments, the first two starting with '{"' encoded) or a bearer value.
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def fingerprint(secret: str) -> str:
    """First 8 hex digits of the secret's SHA-256."""
    return hashlib.sha256(secret.encode()).hexdigest()[:8]


def without(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by [secure], as sent and as a URL or a form would
    carry it (percent-encoded, ``+`` for spaces), longest first so that one secret inside another
    goes whole. For the exact secrets we sent a peer, which a peer may quote back in any shape."""
    from urllib.parse import quote, quote_plus  # only on a failure: the helpers' start never pays

    forms = {
        form for secret in secrets if secret for form in (secret, quote(secret, safe=""), quote_plus(secret))
    }
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return text


def scrub(text: str) -> str:
    """``text`` with anything shaped like a JWT or a bearer credential replaced by [secure].

    A last line of defence for text we do not control (an upstream's error message, a traceback):
    tokenrelay's own messages never contain secrets in the first place.
    """
    text = _JWT.sub(REDACTED, text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
