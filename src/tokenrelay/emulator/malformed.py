"""Requests aiohttp's HTTP/1.1 parser rejects, answered in the emulator's AIP-193 shape.

A request line or header past aiohttp's limits, an invalid method or malformed framing never reaches a
handler or the middleware: aiohttp answers its own plain-text 400, echoing the offending bytes (which
may carry a token), and logs an ERROR traceback. ``MalformedRefusingHandler`` answers code 3 with the
ErrorInfo every other refusal carries, a message naming what was wrong and no request bytes, and logs
the refusal at debug: a client's bad bytes are not the emulator's error.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aiohttp import web
from aiohttp.http_exceptions import (
    BadHttpMethod,
    BadStatusLine,
    HttpProcessingError,
    InvalidHeader,
    LineTooLong,
)
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from ..lite import aip193
from ..lite.aip193 import Code
from .errors import IAM_DOMAIN, ApiError

# the parser's own reason, kept only when it is plain words: its messages quote the raw bytes after it
_PLAIN_REASON = re.compile(r"[A-Za-z][A-Za-z0-9 ,./:-]{0,99}")


def _parser_reason(exc: HttpProcessingError) -> str:
    lines: list[str] = []
    for line in exc.message.replace("can't", "cannot").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("b'", 'b"', "bytearray(", "^")):
            break
        lines.append(stripped.rstrip(":"))
    reason = ": ".join(lines)
    return reason if _PLAIN_REASON.fullmatch(reason) else ""


def describe(exc: HttpProcessingError) -> str:
    """What was wrong with a request the parser rejected, in words that quote none of its bytes."""
    if isinstance(exc, LineTooLong):
        # aiohttp raises the same error for the request line and a header, so the message names both
        return f"request line or header too long: at most {exc.args[1]} bytes"
    if isinstance(exc, BadHttpMethod):
        if "HTTPS" in exc.message:
            return "malformed request: TLS sent to a plain HTTP port (use http://, not https://)"
        return "malformed request line: invalid HTTP method"
    if isinstance(exc, BadStatusLine):
        what = "malformed request line"
    elif isinstance(exc, InvalidHeader):
        what = "malformed header"
    else:
        what = "malformed request"
    reason = _parser_reason(exc)
    return f"{what}: {reason}" if reason else what


def refusal(exc: HttpProcessingError) -> ApiError:
    """The AIP-193 refusal of a request the parser rejected."""
    code = Code.INVALID_ARGUMENT
    return ApiError(code, describe(exc), aip193.error_info(code.name, IAM_DOMAIN))


class MalformedRefusingHandler(RequestHandler):
    """aiohttp's HTTP/1.1 protocol, answering parse errors as the emulator answers every refusal."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        error = refusal(exc)
        self.logger.debug("refused a malformed request from %s: %s", request.remote, error.message)
        response = error.response()
        response.force_close()  # the parser cannot resynchronise on this connection
        return response


def http1_factory(server: web.Server) -> Callable[[], RequestHandler]:
    """A protocol factory like ``server`` itself (``web.Server.__call__``), making refusing handlers."""

    def make() -> RequestHandler:
        # the runner's own handler settings (access log, limits), as web.Server passes them
        return MalformedRefusingHandler(server, loop=server._loop, **server._kwargs)

    return make
