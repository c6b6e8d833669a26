"""Where the proxy sends everything: the one upstream named by --api-url.

The request target a client sends is mapped here, and only here, to the upstream's target: an
origin-form target (``/v1/things?x=1``) is appended to the api-url's own path, byte for byte (``..``
and ``%2f`` included: the path is the upstream's business, the host never changes); an absolute-form
target (``http://host/...``, what clients send to a forward proxy) is accepted only when it names the
upstream's own host and port. Anything else is refused, so the proxy can never be used as a hop elsewhere.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

from ..systemroots import verifying_context

DEFAULT_PORTS = {"http": 80, "https": 443}
# What the HTTP/1.1 parser lets through in a request target: visible ASCII, no space (RFC 9112 §3.2).
_VISIBLE = re.compile(rb"/[\x21-\x7e]*")


@dataclass(frozen=True, slots=True)
class Target:
    """The upstream's address, its base path and how to speak TLS to it."""

    host: str
    port: int
    base_path: bytes  # the api-url's path without its trailing slash: b"" or b"/api"
    authority: bytes  # b"api.example.com", with the port when it is not the scheme's: HTTP/2's :authority
    ssl: ssl.SSLContext | None
    host_header: bytes = field(init=False)  # HTTP/1.1's: "Host: " + authority + CRLF

    def __post_init__(self) -> None:
        object.__setattr__(self, "host_header", b"Host: " + self.authority + b"\r\n")

    @classmethod
    def from_url(cls, api_url: str, ca_file: str | None = None) -> Target:
        parts = urlsplit(api_url)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or DEFAULT_PORTS[scheme]
        authority = f"[{host}]" if ":" in host else host
        if port != DEFAULT_PORTS[scheme]:
            authority += f":{port}"
        context = None
        if scheme == "https":
            context = verifying_context("http/1.1", ca_file)
        return cls(
            host=host,
            port=port,
            base_path=parts.path.rstrip("/").encode(),
            authority=authority.encode("idna" if not host.isascii() else "ascii"),
            ssl=context,
        )

    def target(self, raw: bytes) -> bytes | None:
        """The upstream's request target for a client's, or None when it must be refused."""
        if raw[:1] == b"/":
            return self.base_path + raw
        if b"://" not in raw[:8]:
            return None  # asterisk-form, authority-form or garbage
        try:
            url = httptools.parse_url(raw)
        except httptools.HttpParserInvalidURLError:
            return None
        if url.schema not in (b"http", b"https") or url.host.lower() != self.host.lower().encode():
            return None
        if not self._same_origin(url.schema == b"https", url.port):
            return None
        path = url.path or b"/"
        if url.query:
            path += b"?" + url.query
        return self.base_path + path

    def origin(self, path: bytes) -> bytes | None:
        """The upstream's request target for an HTTP/2 ``:path``, or None when it must be refused.

        Only origin-form, in the bytes an HTTP/1.1 request line could carry: a ``:path`` of
        ``/x HTTP/1.1`` must not reach an upstream (or a log) as a request line of its own.
        """
        if _VISIBLE.fullmatch(path) is None:
            return None
        return self.base_path + path

    def _same_origin(self, https: bool, port: int | None) -> bool:
        """Whether an absolute URI's scheme and port name the upstream (its host already does).

        Another port on the same host is another service: sending it the upstream's request, with
        the token, would answer the client from the wrong place. ``http://host/`` is taken for an
        ``https://host/`` upstream (a client behind HTTP_PROXY cannot ask for TLS otherwise, as the
        proxy refuses CONNECT), but an ``https`` URI is never sent to a plain-http upstream.
        """
        if https and self.ssl is None:
            return False
        named = port or DEFAULT_PORTS["https" if https else "http"]
        upgraded = self.ssl is not None and not https and named == DEFAULT_PORTS["http"] and self.port == 443
        return named == self.port or upgraded
