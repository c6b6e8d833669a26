"""HTTPS to the upstream (verified against the system CAs plus --upstream-ca) and to the token service."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tokenrelay.sidecar.clienttls import session_context

from ..support.proxy import Echo, ServerFactory, StartProxy, Tokens


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    signer: ec.EllipticCurvePrivateKey,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())


def _pem(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


async def _tls_upstream(aiohttp_server: ServerFactory, tmp_path: Path) -> tuple[int, str, Echo]:
    """An Echo upstream serving https for 127.0.0.1 with a certificate from a throwaway CA: its port,
    the CA's PEM file and the Echo."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test CA", ca_key, None, ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert("127.0.0.1", key, ca, ca_key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(
        _pem(tmp_path / "cert.pem", cert.public_bytes(serialization.Encoding.PEM)),
        _pem(
            tmp_path / "key.pem",
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        ),
    )
    ca_file = _pem(tmp_path / "ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    echo = Echo()
    server = await aiohttp_server(echo.app(), ssl=context)
    assert server.port is not None
    return server.port, ca_file, echo


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
