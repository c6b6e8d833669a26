"""The registry's refusals, in the distribution spec's form: ``{"errors": [{code, message, detail}]}``.

Clients print ``<code in lower case>: <message>`` (``denied: requested access to the resource is
denied``), so each message starts with the spec's standard text and then says what to fix.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

API_VERSION_HEADER = {"Docker-Distribution-API-Version": "registry/2.0"}

# code -> (HTTP status, the spec's standard message)
CODES: dict[str, tuple[int, str]] = {
    "BLOB_UNKNOWN": (404, "blob unknown to registry"),
    "BLOB_UPLOAD_INVALID": (400, "blob upload invalid"),
    "BLOB_UPLOAD_UNKNOWN": (404, "blob upload unknown to registry"),
    "DIGEST_INVALID": (400, "provided digest did not match uploaded content"),
    "MANIFEST_BLOB_UNKNOWN": (400, "manifest references a manifest or blob unknown to registry"),
    "MANIFEST_INVALID": (400, "manifest invalid"),
    "MANIFEST_UNKNOWN": (404, "manifest unknown"),
    "NAME_INVALID": (400, "invalid repository name"),
    "NAME_UNKNOWN": (404, "repository name not known to registry"),
    "PAGINATION_NUMBER_INVALID": (400, "invalid number of results requested"),
    "SIZE_INVALID": (400, "provided length did not match content length"),
    "TAG_INVALID": (400, "manifest tag did not match URI"),
    "UNAUTHORIZED": (401, "authentication required"),
    "DENIED": (403, "requested access to the resource is denied"),
    "UNSUPPORTED": (405, "the operation is unsupported"),
    "TOOMANYREQUESTS": (429, "too many requests"),
}


class RegistryError(Exception):
    """A refusal: ``code`` is one of ``CODES``; ``why`` is appended to the standard message."""

    def __init__(
        self,
        code: str,
        why: str = "",
        *,
        status: int | None = None,
        detail: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        default_status, standard = CODES[code]
        self.code = code
        self.message = f"{standard}: {why}" if why else standard
        self.status = status or default_status
        self.detail = detail
        self.headers = headers or {}
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {"errors": [{"code": self.code, "message": self.message, "detail": self.detail}]}

    def response(self) -> web.Response:
        return web.Response(
            status=self.status,
            body=json.dumps(self.body()).encode(),
            content_type="application/json",
            headers={**API_VERSION_HEADER, **self.headers},
        )
