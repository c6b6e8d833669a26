"""The rules for the values ``tokenrelay run`` and the credential helpers both read.

``TOKENRELAY_EXCHANGE_TIMEOUT`` and ``TOKENRELAY_AUTH_URL`` mean the same to both, so they are
checked here, once, with the same bounds; each caller words the error with the setting's name.
Standard library only, and ``urllib.parse`` only when a URL is checked: the credential helpers
import this module.
"""

from __future__ import annotations

MAX_SECONDS = 86400.0  # a timeout of a day or more is a mistake, not a wish


def seconds(raw: object) -> float:
    """A duration setting in seconds: more than 0 and less than a day; ValueError otherwise."""
    try:
        value = float(raw)  # type: ignore[arg-type]  # anything float() refuses is refused
    except (TypeError, ValueError):
        raise ValueError(f"{raw!r} is not a number of seconds") from None
    if not 0 < value < MAX_SECONDS:
        raise ValueError(f"{raw!r} must be more than 0 and less than a day")
    return value


def http_url(text: str) -> str:
    """A base URL setting: http(s), with a host, no query or fragment; without its trailing slash."""
    from urllib.parse import urlsplit

    text = text.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http:// or https:// URL")
    if parts.query or parts.fragment:
        raise ValueError(f"{text!r} must not carry a query or fragment")
    return text
