"""Requests aiohttp's parser rejects get the emulator's AIP-193 refusal, not a plain-text 400."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp.http_exceptions import BadHttpMessage, BadStatusLine, HttpProcessingError, InvalidHeader

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.emulator.malformed import describe

TOKEN = "secret-token-value"  # sent in a malformed header: it must not come back


def refusal(message: str) -> dict[str, Any]:
    return {
        "code": 3,
        "message": message,
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "INVALID_ARGUMENT",
                "domain": "iam.emulator.tokenrelay",
            }
        ],
    }


async def exchange(url: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` on a fresh connection; the status, headers and body of the one answer."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(raw)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in header_lines)}
    return int(status_line.split()[1]), headers, body


CASES = {
    "request line over 8190 bytes": (
        b"GET /iam/v2beta1/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        "request line or header too long: at most 8190 bytes",
    ),
    "header value over 8190 bytes": (
        b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"a" * 9000 + b"\r\n\r\n",
        "request line or header too long: at most 8190 bytes",
    ),
    "invalid method": (
        b"G@T / HTTP/1.1\r\nHost: x\r\n\r\n",
        "malformed request line: invalid HTTP method",
    ),
    "TLS on the plain port": (
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        "malformed request: TLS sent to a plain HTTP port (use http://, not https://)",
    ),
    "bad HTTP version": (
        b"GET / HTTP/9.Z\r\nHost: x\r\n\r\n",
        "malformed request line: Bad status line: Invalid minor version",
    ),
    "header without a colon": (
        b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization Bearer " + TOKEN.encode() + b"\r\n\r\n",
        "malformed request: Invalid header token",
    ),
    "too many headers": (
        b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n",
        "malformed request: Too many headers received",
    ),
    "Content-Length not a number": (
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        "malformed request: Invalid character in Content-Length",
    ),
    "both Content-Length and chunked": (
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "malformed request: Transfer-Encoding cannot be present with Content-Length",
    ),
    "bad chunk size": (
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "malformed request: Invalid character in chunk size",
    ),
}


@pytest.fixture(params=[True, False], ids=["grpc", "http-only"])
async def emulator_url(request: pytest.FixtureRequest) -> Any:
    async with EmulatorServer(Emulator(), grpc=request.param) as running:
        yield running.url


async def test_every_parse_error_is_an_aip193_refusal(
    emulator_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each kind of malformed request answers 400, code 3 naming what was wrong, no ERROR logged."""
    caplog.set_level(logging.DEBUG)
    for name, (raw, message) in CASES.items():
        status, headers, body = await exchange(emulator_url, raw)
        assert (name, status) == (name, 400)
        assert headers["content-type"].startswith("application/json")
        assert (name, json.loads(body)) == (name, refusal(message))
        assert TOKEN.encode() not in body
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert TOKEN not in caplog.text


async def test_a_good_request_still_served_after_a_refusal(emulator_url: str) -> None:
    """A refusal closes only its own connection: the next connection is served normally."""
    await exchange(emulator_url, b"G@T / HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, body = await exchange(
        emulator_url, b"GET /iam/v2beta1/nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 404
    assert json.loads(body)["details"][0]["domain"] == "iam.emulator.tokenrelay"


@pytest.mark.parametrize(
    "exc",
    [
        BadStatusLine(f"GET /x?access_token={TOKEN} HTTP/1.1"),  # aiohttp's pure-Python parser form
        InvalidHeader(f"Authorization Bearer {TOKEN}".encode()),
        BadHttpMessage(f"Invalid header token:\n\n  b'Authorization Bearer {TOKEN}'\n     ^"),
    ],
)
def test_refusal_quotes_none_of_the_request(exc: HttpProcessingError) -> None:
    """Whatever the parser's message quotes from the request, the refusal's message repeats none of it."""
    assert TOKEN not in describe(exc)
