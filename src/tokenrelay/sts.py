"""The wire format of the token exchange, and nothing about when to call it.

``GET {auth_url}/sts/exchange?aud=<audience>&identity=<uid>`` with ``Authorization: Bearer <OIDC
token>`` answers ``{"token": "..."}``, optionally with ``expiry``. Redirects are never followed (the
bearer would travel with them), the answer is capped at 1 MiB, and refusals are read as AIP-193
bodies so that they reach the logs as the service's own words.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp

from . import aip193
from .errors import ExchangeError, ExchangeTimeout
from .redact import REDACTED, scrub
from .timestamps import parse_timestamp

MAX_RESPONSE_BYTES = 1 << 20
# Statuses after which trying again cannot help until someone changes a configuration.
_PERMANENT_CODES = {aip193.Code.INVALID_ARGUMENT, aip193.Code.NOT_FOUND}


@dataclass(frozen=True, slots=True)
class Issued:
    """What one exchange returned."""

    token: str = field(repr=False)
    expiry: float | None = None  # Unix time from the response's `expiry`, when it sent one
    server_time: float | None = None  # Unix time from the response's Date header


def exchange_url(auth_url: str) -> str:
    return auth_url.rstrip("/") + "/sts/exchange"


async def exchange(
    session: aiohttp.ClientSession,
    auth_url: str,
    audience: str,
    identity: str,
    id_token: str,
    *,
    timeout: float,
) -> Issued:
    """Trade ``id_token`` for an API token for ``audience``; raises ExchangeError."""
    url = exchange_url(auth_url)
    try:
        async with session.get(
            url,
            params={"aud": audience, "identity": identity},
            headers={"Authorization": f"Bearer {id_token}", "Accept": "application/json"},
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 5.0)),
        ) as response:
            raw = await _read_capped(response)
            server_time = _date_header(response.headers.get("Date"))
            if response.status != 200:
                raise _refusal(response, raw, audience, id_token)
    except TimeoutError:
        raise ExchangeTimeout(
            f"token service at {url} did not answer within {timeout:g}s "
            "(--exchange-timeout, env TOKENRELAY_EXCHANGE_TIMEOUT)"
        ) from None
    except aiohttp.ClientError as exc:
        raise ExchangeError(f"cannot reach the token service at {url}: {scrub(str(exc))}") from None
    return _parse_success(raw, url, server_time)


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    length = response.content_length
    if length is not None and length > MAX_RESPONSE_BYTES:
        raise ExchangeError(f"token service answer is {length} bytes, over the 1 MiB limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ExchangeError("token service answer is over the 1 MiB limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _refusal(response: aiohttp.ClientResponse, raw: bytes, audience: str, id_token: str) -> ExchangeError:
    status = response.status
    retry_after = _retry_after(response.headers.get("Retry-After"))
    if 300 <= status < 400:
        return ExchangeError(
            f"token service answered HTTP {status} redirecting to "
            f"{response.headers.get('Location', '(no Location)')}; not followed, since the OIDC "
            "token would go with it. Point --auth-url (env TOKENRELAY_AUTH_URL) at the final address",
            status=status,
            retryable=False,
        )
    parsed = aip193.parse(raw)
    if parsed is None:
        return ExchangeError(
            f"token service refused the exchange for audience {audience}: HTTP {status}",
            status=status,
            retryable=status >= 500 or status == 429,
            retry_after=retry_after,
        )
    code, message, reason = parsed
    # A service that quotes the bearer back must not get it into our logs, JWT-shaped or not.
    why = scrub(message.replace(id_token, REDACTED))[:500]
    label = f"{aip193.Code(code).name}, " if code in aip193.Code._value2member_map_ else ""
    return ExchangeError(
        f"token service refused the exchange for audience {audience}: {why} "
        f"({label}{'reason ' + reason + ', ' if reason else ''}HTTP {status})",
        status=status,
        code=code,
        reason=reason,
        retryable=code not in _PERMANENT_CODES,
        retry_after=retry_after,
    )


def _parse_success(raw: bytes, url: str, server_time: float | None) -> Issued:
    try:
        obj: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ExchangeError(f"token service at {url} answered 200 with a body that is not JSON") from None
    token = obj.get("token") if isinstance(obj, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise ExchangeError(f'token service at {url} answered 200 without a "token" string')
    if any(c in token for c in "\r\n\0 "):
        raise ExchangeError(f"token service at {url} answered a token with whitespace in it")
    return Issued(token=token, expiry=_expiry(obj.get("expiry")), server_time=server_time)


def _expiry(value: Any) -> float | None:
    """``expiry`` as a Unix time: a number of seconds, or an ISO 8601 timestamp."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_timestamp(value)
        except ValueError:
            return None
    return None


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    moment = _date_header(value)
    if moment is None:
        return None
    return max(0.0, moment - time.time())


def _date_header(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
