"""The proxy's TLS client contexts for the upstream: the system's roots plus --upstream-ca's.

The system roots come through OpenSSL's hashed directory where it is there (see systemroots), so a
context costs no parsed copy of the bundle; verification and hostname checks stay on.
"""

from __future__ import annotations

import ssl

from ..systemroots import verifying_context


def upstream_context(ca_file: str | None, alpn: str) -> ssl.SSLContext:
    """A verifying client context offering ``alpn``, trusting the system's roots and ``ca_file``'s."""
    return verifying_context(alpn, ca_file)
