"""The TLS context of the sidecar's HTTP session (token service, GitHub's OIDC endpoint), and the
end of aiohttp's import-time copies of the system roots.

aiohttp builds two client contexts when it is imported, a verifying one and one for ``ssl=False``,
and each parses the whole system bundle: about 1 MiB of an idle sidecar's RSS (issues 10 and 11 hold
it under 40 MiB). ``session_context`` builds the verifying context the session uses from
systemroots (the same roots, read from OpenSSL's hashed directory issuer by issuer) and puts it in
place of aiohttp's verifying default; the default for ``ssl=False``, which the sidecar never asks
for, becomes one that loads no roots, as it verifies nothing. The old two are then garbage. Where a
future aiohttp keeps its defaults elsewhere, nothing is swapped and the session still verifies.
"""

from __future__ import annotations

import ssl

from aiohttp import connector

from ..systemroots import verifying_context


def session_context() -> ssl.SSLContext:
    """A verifying context for the session's connector; aiohttp's import-time defaults replaced."""
    verified = verifying_context("http/1.1")  # aiohttp offers http/1.1 only
    if isinstance(getattr(connector, "_SSL_CONTEXT_VERIFIED", None), ssl.SSLContext):
        connector._SSL_CONTEXT_VERIFIED = verified
    if isinstance(getattr(connector, "_SSL_CONTEXT_UNVERIFIED", None), ssl.SSLContext):
        connector._SSL_CONTEXT_UNVERIFIED = _unverified()
    return verified


def _unverified() -> ssl.SSLContext:
    """aiohttp's context for ``ssl=False``, without the roots it would never consult."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.options |= ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(["http/1.1"])
    return context
