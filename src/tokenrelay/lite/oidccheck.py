"""The checks an OIDC token passes before any request carries it, wherever it was read from.

A token that is missing, empty or (when it is a JWT) already expired is refused here with a message
saying what to fix; so is a file that cannot be a token. The sidecar's sources (``idsources``) and the
credential helpers' direct exchange (``helpers.direct``) both read through these. Standard library
only, and no dataclasses (whose import of inspect would cost a helper ~10 ms): the helpers must start
quickly and never load aiohttp.
"""

from __future__ import annotations

import time

from ..errors import IdTokenError, IdTokenExpired
from .jwtclaims import numeric_claim, unverified_claims
from .regularfile import NotRegularFile, read_regular

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the helpers import this module
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_ID_TOKEN_BYTES = 64 * 1024


def checked(raw: str, where: str, wall: Callable[[], float] = time.time) -> tuple[str, float | None]:
    """``raw`` stripped, and its expiry when it is a JWT; IdTokenError when it is empty or expired."""
    value = raw.strip()
    if not value:
        raise IdTokenError(f"the OIDC token in {where} is empty")
    if not value.isascii() or not value.isprintable():
        # It travels as an HTTP header: a line break inside could never be sent.
        raise IdTokenError(
            f"the OIDC token in {where} has a line break, another control character or non-ASCII "
            "text inside it: not a token"
        )
    claims = unverified_claims(value)
    expiry = numeric_claim(claims, "exp") if claims else None
    if expiry is not None and expiry <= wall():
        from .timestamps import format_timestamp  # datetime, only for the message

        raise IdTokenExpired(f"the OIDC token in {where} expired at {format_timestamp(expiry)}")
    return value, expiry


def read_id_token_file(path: str, wall: Callable[[], float] = time.time) -> tuple[str, float | None]:
    """``checked`` of the file at ``path``; IdTokenError saying what is wrong with it (the file
    source's ``fix`` says what to do)."""
    try:
        raw = read_regular(path, MAX_ID_TOKEN_BYTES)
    except NotRegularFile as exc:
        raise IdTokenError(f"the OIDC token path {path} is {exc.kind}, not a regular file") from None
    except FileNotFoundError:
        raise IdTokenError(f"no OIDC token file at {path}") from None
    except IsADirectoryError:
        raise IdTokenError(f"the OIDC token path {path} is a directory, not a file") from None
    except OSError as exc:
        raise IdTokenError(f"cannot read the OIDC token file {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_ID_TOKEN_BYTES:
        raise IdTokenError(f"the OIDC token file {path} is over 64 KiB: not a token")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise IdTokenError(f"the OIDC token file {path} is not ASCII text") from None
    return checked(text, f"file {path}", wall)
