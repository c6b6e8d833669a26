"""The installed sidecar against the emulator of the published API, driven with real curl.

"It works against the emulator" is meant to mean "it works against the published API": here the
OIDC token is an ES256 JWT from the emulator's issuer, the exchange is verified by its token service
(signature, expiry, claimMatch), and the API token is accepted or refused by its API.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.lite.jwtclaims import unverified_claims

from ..support.e2e import BIN, SUBJECT, Stack, free_port, run, sidecar

pytestmark = pytest.mark.e2e


async def test_token_is_the_emulators_api_token_for_the_identity(stack: Stack) -> None:
    """`tokenrelay token` prints an API token the emulator's token service issued for our identity."""
    code, out, err = await run(BIN / "tokenrelay", "token", "--socket", stack.socket)
    assert code == 0, err
    claims = unverified_claims(out.strip())
    assert claims is not None
    assert (claims["sub"], claims["aud"], claims["iss"]) == (stack.identity, stack.url, f"{stack.url}/sts")
    assert claims["exp"] - claims["iat"] == 3600


async def test_curl_with_the_token_reads_the_api(stack: Stack) -> None:
    """The token the socket serves is accepted by the API; without it the API answers 401."""
    _, token, _ = await run(BIN / "tokenrelay", "token", "--socket", stack.socket)
    groups = f"{stack.url}/iam/v2beta1/groups?uidp.descendants_of={stack.org}"
    _, out, _ = await run(
        "curl", "-sS", "-w", "\n%{http_code}", "-H", f"Authorization: Bearer {token.strip()}", groups
    )
    body, status = out.rsplit("\n", 1)
    assert status == "200"
    assert json.loads(body)["totalCount"] == "0"  # the org has no descendants yet, and we may look
    _code, out, _ = await run("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", groups)
    assert out == "401"


async def test_plain_curl_through_the_proxy(stack: Stack) -> None:
    """curl with no token at all, pointed at the proxy, reads the API as the identity."""
    _code, out, _ = await run(
        "curl", "-sS", "-w", "\n%{http_code}", f"{stack.proxy}/iam/v2beta1/groups/{stack.org}"
    )
    body, status = out.rsplit("\n", 1)
    assert status == "200"
    assert json.loads(body)["name"] == "shop"


async def test_viewer_cannot_write_through_the_proxy(stack: Stack) -> None:
    """The proxy adds identity, not privilege: a viewer's create is refused by the API with 403."""
    _code, out, _ = await run(
        "curl",
        "-sS",
        "-w",
        "\n%{http_code}",
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        '{"name": "new-team"}',
        f"{stack.proxy}/iam/v2beta1/groups/{stack.org}",
    )
    body, status = out.rsplit("\n", 1)
    assert status == "403"
    assert json.loads(body)["code"] == 7


async def test_identity_that_does_not_match_reads_as_such(tmp_path: Path) -> None:
    """An identity whose claimMatch names another subject: `tokenrelay token` says why, exit 1."""
    emulator = Emulator()
    async with EmulatorServer(emulator) as server:
        org = emulator.organization("shop")
        other = emulator.workload(org.uid, "system:serviceaccount:shop:other")
        (tmp_path / "oidc-token").write_text(emulator.mint(SUBJECT, server.url, 600))
        sock, process = await sidecar(tmp_path, server.url, other.identity.uid, free_port())
        try:
            code, out, err = await run(BIN / "tokenrelay", "token", "--socket", sock)
        finally:
            process.terminate()
            await process.wait()
    assert code == 1 and out == ""
    assert "PERMISSION_DENIED" in err and "token service refused the exchange" in err
    assert err.count("\n") == 1
