"""HTTP/2 clients on the proxy's port: httpx and curl with prior knowledge, the heal, the proxy's own answers."""

from __future__ import annotations

import asyncio
import json
import shutil

import httpx
import pytest

from .conftest import H2Proxied, Observed, StartProxy, Tokens


def h2client() -> httpx.AsyncClient:
    return httpx.AsyncClient(http1=False, http2=True, timeout=10)


async def test_httpx_http2_gets_the_token_and_the_upstreams_answer(h2proxied: H2Proxied) -> None:
    """httpx over h2c: the upstream sees the proxy's token (not the client's) and its own authority."""
    async with h2client() as client:
        response = await client.post(
            h2proxied.url + "/v1/things?page=2",
            content=b"hello",
            headers={"authorization": "Bearer not-this-one", "x-custom": "kept"},
        )
    assert response.http_version == "HTTP/2"
    assert response.status_code == 200
    seen = response.json()
    assert seen["token"] == "t1"
    assert seen["path"] == "/base/v1/things?page=2"
    assert seen["authority"] == f"127.0.0.1:{h2proxied.echo.port}"
    assert seen["size"] == 5
    assert ["x-custom", "kept"] in seen["headers"]
    assert h2proxied.observed.codes == [200]


async def test_curl_http2_prior_knowledge(h2proxied: H2Proxied) -> None:
    """curl --http2-prior-knowledge gets the upstream's answer over HTTP/2, with the proxy's token."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    curl = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--fail", "--http2-prior-knowledge", "-o", "-", "-w", "\n%{http_version}",
        "-H", "Authorization: Bearer not-this-one", h2proxied.url + "/v1/things",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await curl.communicate()
    assert curl.returncode == 0
    body, version = out.rsplit(b"\n", 1)
    assert version == b"2"
    assert json.loads(body)["token"] == "t1"
