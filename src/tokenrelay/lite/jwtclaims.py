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


# 9999-12-31T23:59:59Z: the last moment a timestamp can be written (and datetime can hold).
LAST_DATE = 253402300799.0


def numeric_claim(claims: dict[str, Any], name: str) -> float | None:
    """A NumericDate claim (``exp``, ``iat``, ``nbf``) as a float, or None when absent or malformed.

    Malformed includes what Python's JSON reader lets through but is no date: ``NaN``,
    ``Infinity`` and anything past year 9999, which no timestamp can show. (A time in the past is
    a date: such a token is refused as expired.)
    """
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return plausible_time(value)


def plausible_time(value: float) -> float | None:
    """``value`` as a Unix time when it is a number no later than year 9999, else None."""
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if -LAST_DATE <= number <= LAST_DATE else None  # NaN fails both comparisons
