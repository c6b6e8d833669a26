"""A token service that cannot be reached, in the project's words, whichever HTTP client failed.

aiohttp says ``Cannot connect to host 127.0.0.1:9 ssl:default [Connect call failed ...]`` (``ssl:default``
even for a plain ``http://`` URL), urllib ``<urlopen error [Errno 111] Connection refused>``. The
sidecar's log and ``/v1/token`` answers (``tokens.sts``), the doctor (``doctor.service``) and the
credential helpers' direct exchange (``helpers.direct``) all say it here instead:
``cannot reach the token service at URL (connection refused): check --auth-url (env TOKENRELAY_AUTH_URL)``.
Standard library only: the credential helpers import this module.
"""

from __future__ import annotations

import errno
import socket

from ..errors import ExchangeError
from .redact import scrub

_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ETIMEDOUT: "connection timed out",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.EADDRNOTAVAIL: "address not available",
}


def unreachable_text(url: str, error: BaseException) -> str:
    """``cannot reach the token service at URL (why)``: the sentence, for callers that give their own fix."""
    return f"cannot reach the token service at {url} ({why(error)})"


def unreachable(url: str, error: BaseException, auth_url_setting: str) -> ExchangeError:
    """The error to raise (retryable: ExchangeError's default), naming the setting to check."""
    return ExchangeError(f"{unreachable_text(url, error)}: check {auth_url_setting}")


def why(error: BaseException) -> str:
    """What went wrong with the connection, in a few words."""
    for cause in _causes(error):
        if isinstance(cause, OSError):
            words = _os_words(cause)
            if words:
                return words
    if type(error).__name__ == "ServerDisconnectedError":  # aiohttp's, not an OSError
        return "the connection closed before an answer"
    return scrub(str(error)) or type(error).__name__


def _causes(error: BaseException) -> list[BaseException]:
    """The error, what it wraps (aiohttp's ``certificate_error``, ``os_error``; urllib's ``reason``),
    and its chain: the innermost named cause first, since it is the most precise."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in found:
        for name in ("certificate_error", "os_error", "reason"):
            inner = getattr(current, name, None)
            if isinstance(inner, BaseException):
                found.append(inner)
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _os_words(error: OSError) -> str:
    verify = getattr(error, "verify_message", None)  # ssl.SSLCertVerificationError
    if verify:
        return f"its TLS certificate does not verify: {verify}"
    if isinstance(error, socket.gaierror):
        return "its host name does not resolve"
    if type(error).__name__.startswith("SSL"):
        return f"TLS failed: {getattr(error, 'reason', None) or error}"
    if error.errno in _ERRNO_WORDS:
        return _ERRNO_WORDS[error.errno]
    if isinstance(error, TimeoutError):
        return "connection timed out"
    return (error.strerror or "").lower()
