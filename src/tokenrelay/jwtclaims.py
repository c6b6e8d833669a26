"""Read a JWT's claims without verifying it.

tokenrelay is a client of the token service: it never needs to trust a token's signature, only to
know when the token expires. Standard library only, and no ``json`` import (``litejson``), so
the credential helpers can use it too.
"""

from __future__ import annotations

import binascii

from .litejson import loads

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the git helper's start-up
if TYPE_CHECKING:
    from typing import Any


def unverified_claims(token: str) -> dict[str, Any] | None:
    """The payload of a compact JWS, or None when ``token`` is not shaped like a JWT."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1]:
        return None
    payload = parts[1]
    try:
        # base64.urlsafe_b64decode, without importing base64 (which imports re)
        raw = binascii.a2b_base64(payload.replace("-", "+").replace("_", "/") + "=" * (-len(payload) % 4))
        claims = loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def numeric_claim(claims: dict[str, Any], name: str) -> float | None:
    """A NumericDate claim (``exp``, ``iat``, ``nbf``) as a float, or None when absent or malformed."""
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
