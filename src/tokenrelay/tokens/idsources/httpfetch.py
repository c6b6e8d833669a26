"""One bounded HTTP request to a platform's token endpoint, for the sources that ask one.

The connection and the whole request are bounded (a metadata server that accepts and never answers
costs the connect or total timeout, then one line); the answer is capped before it is held; a refusal
quotes the platform's own words, cleaned of anything shaped like a token. Redirects are never
followed: the request carries the platform's credential. aiohttp loads only when a source asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import IdTokenError
from ...lite.oidccheck import MAX_ID_TOKEN_BYTES

if TYPE_CHECKING:
    import aiohttp

# A JSON answer around one OIDC token (at most 64 KiB) is well under twice that.
MAX_ANSWER_BYTES = 2 * MAX_ID_TOKEN_BYTES
MAX_WORDS = 200  # of the platform's own error text quoted in a message


async def fetch(
    session: aiohttp.ClientSession | None,
    method: str,
    url: str,
    *,
    what: str,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float,
    connect_timeout: float | None = None,
) -> bytes:
    """The body of a 200 answer; IdTokenError naming ``what`` (the endpoint, never its secrets)."""
    import aiohttp

    if session is None:  # a one-off read (the credential helpers' direct exchange): a session of its own
        from ... import outbound

        async with outbound.session() as own:
            return await fetch(
                own,
                method,
                url,
                what=what,
                params=params,
                headers=headers,
                timeout=timeout,
                connect_timeout=connect_timeout,
            )
    bounds = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
    try:
        async with session.request(
            method, url, params=params, headers=headers, allow_redirects=False, timeout=bounds
        ) as response:
            if response.status != 200:
                words = platform_words(await response.content.read(16 * 1024))
                said = f": {words}" if words else ""
                raise IdTokenError(f"{what} answered HTTP {response.status}{said}")
            return await read_capped(response, MAX_ANSWER_BYTES, what)
    except TimeoutError:
        waited = timeout if connect_timeout is None else min(connect_timeout, timeout)
        raise IdTokenError(
            f"{what} did not answer (connect within {waited:g}s, all within {timeout:g}s)"
        ) from None
    except aiohttp.ClientConnectorError as exc:
        reason = exc.os_error.strerror or type(exc.os_error).__name__
        raise IdTokenError(f"cannot reach {what}: {reason}") from None
    except aiohttp.ClientError as exc:
        raise IdTokenError(f"cannot get an OIDC token from {what}: {type(exc).__name__}") from None


def json_field(body: bytes, name: str, what: str) -> str:
    """The string ``name`` of a JSON object answer; IdTokenError when it is not there."""
    import json

    try:
        document: Any = json.loads(body)
    except ValueError:
        raise IdTokenError(f"{what} answered something that is not JSON") from None
    value = document.get(name) if isinstance(document, dict) else None
    if not isinstance(value, str):
        raise IdTokenError(f'{what} answered without a "{name}"')
    return value


def platform_words(body: bytes) -> str:
    """What a refusal says, in the platform's words: its JSON message, else its first line."""
    import json

    from ...lite.redact import scrub

    text = body.decode("utf-8", "replace")
    try:
        document: Any = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict):
        for key in ("error_description", "message", "Message", "errorMessage", "error"):
            value = document.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value.strip():
                text = value
                break
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    cleaned = "".join(ch if ch.isprintable() else " " for ch in scrub(line))
    return cleaned[:MAX_WORDS]


async def read_capped(response: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """The body, refused past ``limit`` bytes before more than that is held in memory."""
    too_big = IdTokenError(f"{what} answered over {limit // 1024} KiB: not an OIDC token")
    if response.content_length is not None and response.content_length > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)
