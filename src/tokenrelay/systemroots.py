"""Verifying TLS client contexts that trust the system's roots without a parsed copy of the bundle.

``ssl.create_default_context()`` parses the whole system bundle file into each context it builds
(about 0.5 MiB apiece). Where OpenSSL's hashed certificate directory is there (``update-ca-certificates``
writes it next to the bundle, from the same certificates), these contexts point at the directory
instead: OpenSSL then reads only the issuer a handshake asks for. The trusted set is the same, and
verification and hostname checks stay on. When ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` names a store
other than OpenSSL's default, or there is no hashed directory, the bundle is loaded as before, so no
root the operator configured is left out. Used by the proxy (proxy/target.py, proxy/http2/upstream.py)
and the sidecar's HTTP session (sidecar/clienttls.py). Standard library only.
"""

from __future__ import annotations

import os
import re
import ssl
from pathlib import Path

_HASHED = re.compile(r"[0-9a-f]{8}\.[0-9]+")


def verifying_context(alpn: str, ca_file: str | None = None) -> ssl.SSLContext:
    """A verifying client context offering ``alpn``, trusting the system's roots and ``ca_file``'s."""
    capath = _hashed_directory()
    context = ssl.create_default_context(capath=capath) if capath else ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    context.set_alpn_protocols([alpn])
    return context


def _hashed_directory() -> str | None:
    """OpenSSL's certificate directory when it holds every system root, else None."""
    paths = ssl.get_default_verify_paths()
    if not _default(paths.openssl_cafile_env, paths.openssl_cafile):
        return None  # the operator chose where roots live: load them exactly as OpenSSL would
    if not _default(paths.openssl_capath_env, paths.openssl_capath) or not paths.capath:
        return None
    try:
        hashed = any(_HASHED.fullmatch(entry.name) for entry in Path(paths.capath).iterdir())
    except OSError:
        return None
    return paths.capath if hashed else None


def _default(variable: str, default: str) -> bool:
    """Whether ``variable`` is unset or names OpenSSL's own default (as many images set it)."""
    value = os.environ.get(variable)
    return not value or os.path.realpath(value) == os.path.realpath(default)
