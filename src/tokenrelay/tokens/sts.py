"""The wire format of the token exchange, and nothing about when to call it.

``GET {auth_url}/sts/exchange?aud=<audience>&identity=<uid>`` with ``Authorization: Bearer <OIDC
token>`` answers ``{"token": "..."}``, optionally with ``expiry``. Redirects are never followed (the
bearer would travel with them) and the answer is capped at 1 MiB. What the answer means (the token,
a refusal in the service's own words) is read by ``stsanswer``, which the credential helpers share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp

from ..errors import ExchangeTimeout
from ..lite.names import where
from ..lite.stsanswer import MAX_ANSWER_BYTES, http_date, oversized, refusal, token_from
from ..lite.unreachable import unreachable

AUTH_URL_SETTING = where("auth_url")
IDENTITY_SETTING = where("identity")


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
            server_time = http_date(response.headers.get("Date"))
            if response.status != 200:
                raise refusal(
                    response.status,
                    raw,
                    audience=audience,
                    id_token=id_token,
                    location=response.headers.get("Location"),
                    retry_after=response.headers.get("Retry-After"),
                    auth_url_setting=AUTH_URL_SETTING,
                    identity_setting=IDENTITY_SETTING,
                )
    except TimeoutError:
        raise ExchangeTimeout(
            f"token service at {url} did not answer within {timeout:g}s ({where('exchange_timeout')})"
        ) from None
    except aiohttp.ClientError as exc:
        raise unreachable(url, exc, AUTH_URL_SETTING) from None
    token, expiry = token_from(raw, url)
    return Issued(token, expiry, server_time)


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    length = response.content_length
    if length is not None and length > MAX_ANSWER_BYTES:
        raise oversized(length)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise oversized()
        chunks.append(chunk)
    return b"".join(chunks)
