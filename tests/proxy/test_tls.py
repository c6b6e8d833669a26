"""HTTPS to the upstream (verified against the system CAs plus --upstream-ca) and to the token service."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tokenrelay.serving.clienttls import session_context
from tokenrelay.testing import loopback_certificates

from ..support.proxy import Echo, ServerFactory, StartProxy, Tokens


async def _tls_upstream(aiohttp_server: ServerFactory, tmp_path: Path) -> tuple[int, str, Echo]:
    """An Echo upstream serving https for 127.0.0.1 with a certificate from a throwaway CA: its port,
    the CA's PEM file and the Echo."""
    certificates = loopback_certificates(tmp_path)
    echo = Echo()
    server = await aiohttp_server(echo.app(), ssl=certificates.server_context())
    assert server.port is not None
    return server.port, certificates.ca, echo


async def test_https_upstream_trusted_through_upstream_ca(
    aiohttp_server: ServerFactory, start_proxy: StartProxy, tmp_path: Path
) -> None:
    """With --upstream-ca the proxy reaches a privately signed upstream; without it, 502 (not trusted)."""
    port, ca_file, echo = await _tls_upstream(aiohttp_server, tmp_path)
    api_url = f"https://127.0.0.1:{port}/base"

    trusted = await start_proxy(api_url, Tokens().build(api_url), upstream_ca=ca_file)
    untrusted = await start_proxy(api_url, Tokens().build(api_url))
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{trusted.port}/v1/x") as response:
            assert response.status == 200
            assert (await response.json())["token"] == "t1"
        async with session.get(f"http://127.0.0.1:{untrusted.port}/v1/x") as response:
            assert response.status == 502
            assert (await response.json())["details"][0]["reason"] == "UPSTREAM_UNREACHABLE"
    assert len(echo.seen) == 1


async def test_https_upstream_hostname_is_checked(
    aiohttp_server: ServerFactory, start_proxy: StartProxy, tmp_path: Path
) -> None:
    """A trusted certificate for another name (127.0.0.1, reached as localhost) is refused: 502."""
    port, ca_file, echo = await _tls_upstream(aiohttp_server, tmp_path)
    api_url = f"https://localhost:{port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url), upstream_ca=ca_file)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{proxy.port}/v1/x") as response,
    ):
        assert response.status == 502
        assert (await response.json())["details"][0]["reason"] == "UPSTREAM_UNREACHABLE"
    assert echo.seen == []


async def test_https_upstream_trusted_through_ssl_cert_file(
    aiohttp_server: ServerFactory, start_proxy: StartProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system roots are OpenSSL's, so a bundle named by SSL_CERT_FILE is trusted without --upstream-ca."""
    port, ca_file, echo = await _tls_upstream(aiohttp_server, tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    api_url = f"https://127.0.0.1:{port}/base"
    proxy = await start_proxy(api_url, Tokens().build(api_url))
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{proxy.port}/v1/x") as response,
    ):
        assert response.status == 200
    assert len(echo.seen) == 1


async def test_sidecar_session_verifies_with_the_system_roots(
    aiohttp_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sidecar's HTTP session (and aiohttp's default, swapped for it) refuses a privately signed
    token service, and trusts it once SSL_CERT_FILE names its CA."""
    port, ca_file, echo = await _tls_upstream(aiohttp_server, tmp_path)
    url = f"https://127.0.0.1:{port}/v1/x"
    for connector in (aiohttp.TCPConnector(ssl=session_context()), aiohttp.TCPConnector()):
        async with aiohttp.ClientSession(connector=connector) as session:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(url)
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=session_context())) as session,
        session.get(url) as response,
    ):
        assert response.status == 200
    assert len(echo.seen) == 1
