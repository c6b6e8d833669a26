"""Read a JWT's claims without verifying it.

tokenrelay is a client of the token service: it never needs to trust a token's signature, only to
know when the token expires. Standard library only, and no ``json`` import (``litejson``), so
the credential helpers can use it too.
"""

from __future__ import annotations

from .litejson import loads

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the git helper's start-up
if TYPE_CHECKING:
    from typing import Any


def unverified_claims(token: str) -> dict[str, Any] | None:
    """The payload of a compact JWS, or None when ``token`` is not shaped like a JWT."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1]:
        return None
    try:
        claims = loads(_base64url(parts[1]))
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return None
    return claims if isinstance(claims, dict) else None


_BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_SEXTET = {char: value for value, char in enumerate(_BASE64URL)}


def _base64url(segment: str) -> bytes:
    """A JWT segment decoded as ``base64.urlsafe_b64decode`` would (padding optional), without
    importing base64 (which imports re) nor, for the plain unpadded base64url a JWT holds, binascii:
    loading that extension costs the git helper more than decoding here."""
    if len(segment) % 4 != 1 and not segment.strip(_BASE64URL):
        decoded = bytearray()
        for start in range(0, len(segment), 4):  # 4 characters at a time: linear in a long token
            quantum = segment[start : start + 4]
            number = 0
            for char in quantum:
                number = number << 6 | _SEXTET[char]
            bits = 6 * len(quantum)
            decoded += (number >> bits % 8).to_bytes(bits // 8, "big")  # bits past the last byte: dropped
        return bytes(decoded)
    import binascii  # anything else (padding, '+', '/', stray characters) as binascii reads it

    return binascii.a2b_base64(segment.replace("-", "+").replace("_", "/") + "=" * (-len(segment) % 4))


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
