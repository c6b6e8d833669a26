"""Verifying TLS client contexts that trust the system's roots without a parsed copy of the bundle.

``ssl.create_default_context()`` parses the whole system bundle file into each context it builds
(about 0.5 MiB apiece). Where OpenSSL's hashed certificate directory is there (``update-ca-certificates``
writes it next to the bundle, from the same certificates), these contexts point at the directory
instead: OpenSSL then reads only the issuer a handshake asks for. The trusted set is the same, and
verification and hostname checks stay on. When ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` names a store
other than OpenSSL's default, or there is no hashed directory, the bundle is loaded as before, so no
root the operator configured is left out. Used by the proxy (proxy/target.py, proxy/http2/upstream.py)
and the sidecar's HTTP session (serving/clienttls.py). ``no_default_roots`` keeps the contexts aiohttp
builds when it is imported from parsing the bundle at all, since clienttls replaces them anyway.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from collections.abc import Iterator
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


@contextlib.contextmanager
def no_default_roots() -> Iterator[None]:
    """While it holds, a context that loads OpenSSL's default roots loads none.

    For importing aiohttp: its connector module builds two contexts at import time, each parsing the
    whole system bundle (about 60 ms apiece when timed alone; without them ``tokenrelay exec`` uses
    190 ms of CPU before its command starts instead of 240, bench/exec_start.py, and the idle sidecar
    holds 1.2 MiB less), and clienttls.session_context puts contexts of its own in their place
    before the first request. Should a future aiohttp keep them elsewhere, they trust nothing: a
    request on them fails, none goes unverified. Call it before any thread runs: it sets the
    process's environment.
    """
    saved = {name: os.environ.get(name) for name in _ROOT_VARIABLES}
    os.environ.update(dict.fromkeys(_ROOT_VARIABLES, os.devnull))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_ROOT_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")
