"""What the token service's answer to an exchange means, whichever HTTP client carried it.

``GET {auth_url}/sts/exchange`` answers 200 ``{"token": "..."}`` (with ``expiry`` when the service
states one; unknown fields are ignored) or a refusal, read as an AIP-193 body so that it reaches the
person who must act as the service's own words. The sidecar (``sts``, aiohttp) and the credential
helpers' direct exchange (``helpers.direct``, urllib) both read answers here. Standard library
only, and no dataclasses (whose import of inspect would cost a helper ~10 ms): the helpers must
start quickly and never load aiohttp.
"""

from __future__ import annotations

import json
import re
import time
from email.utils import parsedate_to_datetime

from ..errors import ExchangeError
from . import aip193
from .jwtclaims import plausible_time
from .redact import scrub, without
from .timestamps import parse_timestamp

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the helpers import this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_ANSWER_BYTES = 1 << 20
# RFC 6750's b64token: the only characters a bearer token may hold. Every --render format, a
# template's env file and an Authorization header can carry these unquoted; a control character or
# shell syntax such as "$(...)" would break a settings.xml or run in an env file.
B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def retryable(status: int) -> bool:
    """Whether trying again later may help after an answer with ``status``: the one predicate.

    A 5xx or a 429 is a failure of the moment; any other refusal (a 400, a 401, a 403, whatever its
    AIP-193 code) waits for someone to change a configuration. Failures with no answer at all
    (unreachable, timed out, garbled) are retryable too: ExchangeError's default.
    """
    return status >= 500 or status == 429


def token_from(raw: bytes, url: str) -> tuple[str, float | None]:
    """A 200 answer's token and stated expiry (Unix time, None when not stated); else ExchangeError."""
    try:
        obj: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ExchangeError(f"token service at {url} answered 200 with a body that is not JSON") from None
    token = obj.get("token") if isinstance(obj, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise ExchangeError(f'token service at {url} answered 200 without a "token" string')
    if any(c in token for c in "\r\n\0 \t"):
        raise ExchangeError(f"token service at {url} answered a token with whitespace in it")
    if B64TOKEN.fullmatch(token) is None:
        # named by code point only: the token itself is never shown
        bad = next((c for c in token if not (c.isascii() and (c.isalnum() or c in "-._~+/="))), "=")
        where = "" if bad != "=" else " before its end"
        raise ExchangeError(
            f"token service at {url} answered a token holding U+{ord(bad):04X}{where}, which no bearer "
            "token may hold (RFC 6750: letters, digits, -._~+/ and trailing =); the token held is kept"
        )
    return token, stated_expiry(obj.get("expiry"))


def refusal(
    status: int,
    raw: bytes,
    *,
    audience: str,
    id_token: str,
    location: str | None,
    retry_after: str | None,
    auth_url_setting: str,
    identity_setting: str,
) -> ExchangeError:
    """The error for a non-200 answer; ``auth_url_setting`` and ``identity_setting`` name what the
    reader sets to fix a redirect and an unknown identity.

    Every field the service chose (message, ErrorInfo reason, Location) is redacted alike: a service
    that echoes the bearer may do it anywhere, and the error reaches logs, /readyz and the socket's 503.
    """
    if 300 <= status < 400:
        shown = _where_to(location, id_token) if location else "(no Location)"
        return ExchangeError(
            f"token service answered HTTP {status} redirecting to {shown}; "
            "not followed, since the OIDC token would go with it. "
            f"Point {auth_url_setting} at the final address",
            status=status,
            retryable=False,
        )
    delay = retry_after_seconds(retry_after)
    parsed = aip193.parse(raw)
    if parsed is None:
        return ExchangeError(
            f"token service refused the exchange for audience {audience}: HTTP {status}",
            status=status,
            retryable=retryable(status),
            retry_after=delay,
        )
    code, message, reason = parsed
    why = redacted(message, id_token)[:500]
    reason = redacted(reason, id_token)[:100]
    label = f"{aip193.Code(code).name}, " if code in aip193.Code._value2member_map_ else ""
    # the one name an exchange looks up is the identity's uid: its NOT_FOUND is always that one
    fix = (
        f": check {identity_setting}, the uid of an identity the token service knows"
        if code == aip193.Code.NOT_FOUND
        else ""
    )
    return ExchangeError(
        f"token service refused the exchange for audience {audience}: {why} "
        f"({label}{'reason ' + reason + ', ' if reason else ''}HTTP {status}){fix}",
        status=status,
        code=code,
        reason=reason,
        retryable=retryable(status),
        retry_after=delay,
    )


def redacted(text: str, id_token: str) -> str:
    """``text`` with the bearer (as sent, or percent-encoded as in a URL) and anything JWT-shaped
    replaced by [secure]: a service that quotes it back must not get it into our errors."""
    return scrub(without(text, (id_token,)))


def _where_to(location: str, id_token: str) -> str:
    """A redirect's target as the reader needs it to fix the URL setting: the address, never the
    query or fragment (where a service would put an echoed bearer), decoded then redacted."""
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(location)
    except ValueError:
        return "(an unreadable Location)"
    address = f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.scheme else parts.path
    hidden = "?…" if parts.query or parts.fragment else ""
    return redacted(unquote(address), id_token)[:300] + hidden


def oversized(length: int | None = None) -> ExchangeError:
    """The error for an answer over MAX_ANSWER_BYTES (``length`` when the headers announced it)."""
    size = f" {length} bytes," if length is not None else ""
    return ExchangeError(f"token service answer is{size} over the 1 MiB limit")


def stated_expiry(value: object) -> float | None:
    """``expiry`` as a Unix time: a number of seconds, or an ISO 8601 timestamp; else None
    (also for ``NaN``, ``Infinity`` and times past year 9999, which no timestamp can show)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return plausible_time(value)
    if isinstance(value, str):
        try:
            return plausible_time(parse_timestamp(value))
        except ValueError:
            return None
    return None


def retry_after_seconds(value: str | None, wall: Callable[[], float] = time.time) -> float | None:
    """``Retry-After`` (seconds, or an HTTP date) as seconds from now; None when absent or malformed."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit() also takes '²' and '٣', which float() refuses
        return float(value)
    moment = http_date(value)
    if moment is None:
        return None
    return max(0.0, moment - wall())


def http_date(value: str | None) -> float | None:
    """An HTTP date header (``Date``, ``Retry-After``) as a Unix time, or None."""
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
