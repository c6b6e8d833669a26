"""``--trust-issuer ISSUER=JWKS``: an external issuer whose discovery nobody can reach (a cluster's
``https://kubernetes.default.svc``) is trusted with its keys from a file or a JWKS URL."""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
from aiohttp import web

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.emulator.iam import identities
from tokenrelay.emulator.sts.issuer import SigningKey

from ..support.kube import cli

CLUSTER = "https://kubernetes.default.svc"
SUBJECT = "system:serviceaccount:shop:checkout"


def cluster_token(key: SigningKey, audience: str) -> str:
    """A service-account token as a cluster's API server issues it (signed by ``key``)."""
    now = int(time.time())
    return key.sign({"iss": CLUSTER, "sub": SUBJECT, "aud": [audience], "iat": now, "exp": now + 600})


async def exchanges(http: aiohttp.ClientSession, upstream: EmulatorServer, identity: str, token: str) -> int:
    params = {"aud": upstream.url, "identity": identity}
    headers = {"Authorization": f"Bearer {token}"}
    async with http.get(upstream.url + "/sts/exchange", params=params, headers=headers) as response:
        return response.status


async def test_a_jwks_file_verifies_an_issuer_without_discovery_and_follows_rotation(tmp_path: Path) -> None:
    """ISSUER=FILE: the cluster's tokens exchange with the keys in the file, a token of a key not in it
    is refused, and a rotated key written to the file is read at its first token."""
    jwks = tmp_path / "jwks.json"
    first, second = SigningKey.generate(), SigningKey.generate()
    jwks.write_text(json.dumps({"keys": [first.jwk]}))
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(aiohttp.ClientSession())
        upstream = await stack.enter_async_context(
            EmulatorServer(Emulator(trusted_issuers=[f"{CLUSTER}={jwks}"]))
        )
        org = upstream.emulator.organization("acme")
        identity = identities.create(
            upstream.emulator.resources, org.uid, {"claimMatch": {"issuer": CLUSTER, "subject": SUBJECT}}
        ).uid
        assert await exchanges(http, upstream, identity, cluster_token(first, upstream.url)) == 200
        assert await exchanges(http, upstream, identity, cluster_token(second, upstream.url)) == 401
        jwks.write_text(json.dumps({"keys": [first.jwk, second.jwk]}))
        assert await exchanges(http, upstream, identity, cluster_token(second, upstream.url)) == 200


async def test_a_jwks_url_verifies_an_issuer_served_elsewhere() -> None:
    """ISSUER=JWKS_URL: the keys come from that URL (as `kubectl proxy` serves /openid/v1/jwks)."""
    key = SigningKey.generate()

    async def keys(_: web.Request) -> web.Response:
        return web.json_response({"keys": [key.jwk]})

    app = web.Application()
    app.router.add_get("/openid/v1/jwks", keys)
    async with AsyncExitStack() as stack:
        runner = web.AppRunner(app)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        http = await stack.enter_async_context(aiohttp.ClientSession())
        trusted = f"{CLUSTER}=http://127.0.0.1:{port}/openid/v1/jwks"
        upstream = await stack.enter_async_context(EmulatorServer(Emulator(trusted_issuers=[trusted])))
        org = upstream.emulator.organization("acme")
        identity = identities.create(
            upstream.emulator.resources, org.uid, {"claimMatch": {"issuer": CLUSTER, "subject": SUBJECT}}
        ).uid
        assert await exchanges(http, upstream, identity, cluster_token(key, upstream.url)) == 200


def test_a_jwks_file_that_cannot_be_read_stops_the_start_naming_the_flag(tmp_path: Path) -> None:
    """`tokenrelay emulate --trust-issuer ISSUER=FILE` with no JWKS in FILE exits 2 naming the flag and
    the file, before listening."""
    (tmp_path / "jwks.json").write_text("{not json")
    for path in (tmp_path / "missing.json", tmp_path / "jwks.json"):
        result = subprocess.run(
            [cli(), "emulate", "--listen", "127.0.0.1:0", "--trust-issuer", f"{CLUSTER}={path}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (result.returncode, result.stdout) == (2, "")
        assert f"argument --trust-issuer: {path} is not a readable JWKS file" in result.stderr
