"""What a client's request shape must not break: HEAD after a 401, TRACE, HTTP/1.0 keep-alive."""

from __future__ import annotations

import asyncio
import re
import shutil

import pytest

from .conftest import Proxied, body_of, raw


async def test_head_answered_401_is_retried_without_waiting_for_a_body(proxied: Proxied) -> None:
    """HEAD whose first answer is a 401 gets the retried answer at once, not a 504 after the timeout."""
    proxied.echo.revoked.add("t1")
    async with asyncio.timeout(2):
        answer = await raw(proxied.port, b"HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert [seen["token"] for seen in proxied.echo.seen] == ["t1", "t2"]


async def test_trace_is_refused(proxied: Proxied) -> None:
    """TRACE would echo the injected Authorization back to the client: 405, nothing forwarded."""
    answer = await raw(proxied.port, b"TRACE /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 Method Not Allowed")
    assert body_of(answer)["details"][0]["reason"] == "METHOD_NOT_ALLOWED"
    assert "TRACE" in body_of(answer)["message"]
    assert proxied.echo.seen == []


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ApacheBench (apache2-utils)")
async def test_apachebench_keep_alive_over_http_1_0(proxied: Proxied) -> None:
    """`ab -k` (HTTP/1.0 with Connection: keep-alive) completes, reusing its connections."""
    process = await asyncio.create_subprocess_exec(
        "ab", "-k", "-n", "40", "-c", "4", "-s", "3", proxied.url + "/ab",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(20):
        out, _ = await process.communicate()
    report = out.decode()
    assert process.returncode == 0, report
    assert re.search(r"Complete requests:\s+40\n", report), report
    assert re.search(r"Failed requests:\s+0\n", report), report
    assert re.search(r"Keep-Alive requests:\s+40\n", report), report


async def test_http_1_0_keep_alive_is_announced_or_closed(proxied: Proxied) -> None:
    """An HTTP/1.0 client asking for keep-alive is told it got it; without asking, the proxy closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", proxied.port)
    for path in (b"/one", b"/two"):
        writer.write(b"GET %s HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" % path)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"\r\nConnection: keep-alive\r\n" in head
        length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
        assert path in await reader.readexactly(length)
    writer.close()
    answer = await raw(proxied.port, b"GET /three HTTP/1.0\r\n\r\n")
    assert b"/base/three" in answer  # read to the proxy's close
