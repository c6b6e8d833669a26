"""The token service: claim matching, expiry, signature, refusals; and the sidecar's code against it."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import aiohttp
import jwt
import pytest

from tokenrelay.emulator import Emulator, EmulatorServer, RotatingTokenFile
from tokenrelay.emulator.iam import identities
from tokenrelay.emulator.sts.issuer import SigningKey
from tokenrelay.errors import ExchangeError
from tokenrelay.lite.redact import fingerprint
from tokenrelay.tokens import sts
from tokenrelay.tokens.exchanger import Exchanger
from tokenrelay.tokens.idsources import FileSource
from tokenrelay.tokens.provider import TokenProvider

from ..support.emulator import World, details


async def exchange(
    world: World,
    oidc: str | None,
    identity: str | None,
    aud: str | None = None,
    method: str = "GET",
    **kw: Any,
) -> tuple[int, Any]:
    params = {k: v for k, v in (("aud", aud or world.url), ("identity", identity)) if v is not None}
    headers = {"Authorization": f"Bearer {oidc}"} if oidc is not None else {}
    async with world.http.request(
        method, world.url + "/sts/exchange", params=params, headers=headers, **kw
    ) as r:
        return r.status, await r.json()


def claims_of(world: World, token: str, audience: str) -> dict[str, Any]:
    """Claims of an API token, verified with the token service's public key."""
    decoded: dict[str, Any] = jwt.decode(
        token, world.emulator.tokens.key.public, algorithms=["ES256"], audience=audience
    )
    return decoded


async def test_exchange_issues_an_api_token(world: World) -> None:
    """A matching OIDC token gets an ES256 API token: iss, sub = identity uid, aud, iat, exp = iat + 1 h."""
    uid = world.uids["viewer"]
    status, body = await exchange(world, world.emulator.mint("sub-viewer"), uid)
    assert status == 200
    assert list(body) == ["token"]
    assert jwt.get_unverified_header(body["token"])["alg"] == "ES256"
    claims = claims_of(world, body["token"], world.url)
    assert claims["sub"] == uid
    assert claims["aud"] == world.url
    assert claims["iss"] == world.url + "/sts"
    assert claims["exp"] - claims["iat"] == 3600
    world.tokens["exchanged"] = body["token"]
    status, _ = await world.call("GET", "/iam/v2beta1/groups", as_="exchanged")
    assert status == 200


async def test_post_with_form_body(world: World) -> None:
    """POST with aud and identity in a form body works like GET."""
    headers = {"Authorization": f"Bearer {world.emulator.mint('sub-owner')}"}
    form = {"aud": "https://registry.example", "identity": world.uids["owner"]}
    async with world.http.post(world.url + "/sts/exchange", data=form, headers=headers) as r:
        assert r.status == 200
        token = (await r.json())["token"]
    assert claims_of(world, token, "https://registry.example")["sub"] == world.uids["owner"]


@pytest.mark.parametrize("missing", ["aud", "identity"])
async def test_missing_fields_are_invalid_argument(world: World, missing: str) -> None:
    """Without aud or identity the answer is 400 with code 3 naming the field."""
    params = {"aud": world.url, "identity": world.uids["owner"]}
    del params[missing]
    headers = {"Authorization": f"Bearer {world.emulator.mint('sub-owner')}"}
    async with world.http.get(world.url + "/sts/exchange", params=params, headers=headers) as r:
        status, error = r.status, await r.json()
    assert (status, error["code"]) == (400, 3)
    assert details(error, "BadRequest")["fieldViolations"][0]["field"] == missing


async def test_missing_bearer_is_unauthenticated(world: World) -> None:
    """No OIDC token at all gets 401 with code 16."""
    status, error = await exchange(world, None, world.uids["owner"])
    assert (status, error["code"]) == (401, 16)


async def test_expired_oidc_token_is_refused(world: World) -> None:
    """An OIDC token past its exp gets 16."""
    token = world.emulator.mint("sub-owner", lifetime=60)
    world.clock.jump_wall(61)
    status, error = await exchange(world, token, world.uids["owner"])
    assert (status, error["code"]) == (401, 16)
    assert "expired" in error["message"]


async def test_token_signed_by_another_key_is_refused(world: World) -> None:
    """A token claiming this issuer, even with its kid, but signed by another key gets 16."""
    forger = SigningKey.generate()
    now = int(world.wall())
    claims = {"iss": world.url, "sub": "sub-owner", "aud": world.url, "iat": now, "exp": now + 600}
    forged = jwt.encode(
        claims, forger.private, algorithm="ES256", headers={"kid": world.emulator.issuer.key.kid}
    )
    status, error = await exchange(world, forged, world.uids["owner"])
    assert (status, error["code"]) == (401, 16)
    unknown_kid = forger.sign(claims)
    assert (await exchange(world, unknown_kid, world.uids["owner"]))[0] == 401
    unsigned = jwt.encode(claims, "", algorithm="none")
    assert (await exchange(world, unsigned, world.uids["owner"]))[0] == 401


async def test_unknown_identity_is_not_found(world: World) -> None:
    """An identity uid that does not exist gets 404 with code 5."""
    status, error = await exchange(
        world, world.emulator.mint("sub-owner"), world.org.uid + "/ffffffffffffffff"
    )
    assert (status, error["code"]) == (404, 5)


async def test_subject_mismatch_is_permission_denied(world: World) -> None:
    """A valid token whose subject is not the identity's claimMatch gets 403 with code 7."""
    status, error = await exchange(world, world.emulator.mint("sub-viewer"), world.uids["owner"])
    assert (status, error["code"]) == (403, 7)
    assert details(error, "ErrorInfo")["reason"] == "PERMISSION_DENIED"


async def test_untrusted_issuer_is_refused(world: World) -> None:
    """A token from an issuer that is neither the emulator's nor configured gets 16."""
    outsider = SigningKey.generate()
    now = int(world.wall())
    token = outsider.sign({"iss": "https://evil.example", "sub": "sub-owner", "iat": now, "exp": now + 60})
    status, error = await exchange(world, token, world.uids["owner"])
    assert (status, error["code"]) == (401, 16)
    assert "not trusted" in error["message"]


async def test_configured_issuer_is_verified_through_discovery_and_jwks(http: aiohttp.ClientSession) -> None:
    """A trusted external issuer's token verifies via its discovery document and JWKS; claims still match."""
    async with AsyncExitStack() as stack:
        platform = await stack.enter_async_context(EmulatorServer(Emulator()))
        trusting = Emulator(trusted_issuers=[platform.url + "/"])
        upstream = await stack.enter_async_context(EmulatorServer(trusting))
        org = upstream.emulator.organization("acme")
        identity = identities.create(
            upstream.emulator.resources, org.uid, {"claimMatch": {"issuer": platform.url, "subject": "ci"}}
        )
        params = {"aud": upstream.url, "identity": identity.uid}
        for subject, expected in (("ci", 200), ("someone-else", 403)):
            headers = {"Authorization": f"Bearer {platform.emulator.mint(subject, upstream.url)}"}
            async with http.get(upstream.url + "/sts/exchange", params=params, headers=headers) as r:
                assert r.status == expected, subject
        # the emulator's own issuer token does not match an identity of the external issuer
        headers = {"Authorization": f"Bearer {upstream.emulator.mint('ci', upstream.url)}"}
        async with http.get(upstream.url + "/sts/exchange", params=params, headers=headers) as r:
            assert r.status == 403


async def test_discovery_and_jwks_are_served(world: World) -> None:
    """The issuer publishes a discovery document whose JWKS verifies the tokens it mints."""
    async with world.http.get(world.url + "/.well-known/openid-configuration") as r:
        discovery = await r.json()
    assert discovery["issuer"] == world.url
    async with world.http.get(discovery["jwks_uri"]) as r:
        keys = jwt.PyJWKSet.from_dict(await r.json())
    token = world.emulator.mint("someone", "aud-x")
    key = keys[jwt.get_unverified_header(token)["kid"]]
    assert jwt.decode(token, key.key, algorithms=["ES256"], audience="aud-x")["sub"] == "someone"


async def test_token_lifetime_setting(http: aiohttp.ClientSession) -> None:
    """--token-lifetime sets exp - iat of the API tokens."""
    async with EmulatorServer(Emulator(token_lifetime=90)) as server:
        org = server.emulator.organization("o")
        uid = server.emulator.workload(org.uid, "s").identity.uid
        issued = await sts.exchange(http, server.url, server.url, uid, server.emulator.mint("s"), timeout=5)
        claims = jwt.decode(issued.token, options={"verify_signature": False})
        assert claims["exp"] - claims["iat"] == 90


async def test_sidecar_exchange_code_reads_refusals(world: World) -> None:
    """sts.exchange gets a token, and turns a refusal into an ExchangeError with the code."""
    issued = await sts.exchange(
        world.http, world.url, world.url, world.uids["owner"], world.emulator.mint("sub-owner"), timeout=5
    )
    assert claims_of(world, issued.token, world.url)["sub"] == world.uids["owner"]
    with pytest.raises(ExchangeError) as caught:
        await sts.exchange(
            world.http, world.url, world.url, world.uids["owner"], world.emulator.mint("nobody"), timeout=5
        )
    assert (caught.value.status, caught.value.code, caught.value.retryable) == (403, 7, False)


async def test_token_provider_gets_a_token_through_a_rotating_file(world: World, tmp_path: Any) -> None:
    """A TokenProvider reading a kubelet-style token file obtains an API token the API accepts."""

    async def mint() -> str:
        return world.emulator.mint("sub-owner", world.url, lifetime=600)

    token_file = RotatingTokenFile(tmp_path / "oidc", mint)
    await token_file.start()
    try:
        exchanger = Exchanger(world.http, world.url, world.uids["owner"], FileSource(str(token_file.path)))
        provider = TokenProvider(world.url, exchanger)
        token = await provider.get()
    finally:
        await token_file.stop()
    assert claims_of(world, token.value, world.url)["sub"] == world.uids["owner"]
    world.tokens["provided"] = token.value
    status, _ = await world.call("GET", "/iam/v2beta1/groups", as_="provided")
    assert status == 200
    assert fingerprint(token.value) == token.fingerprint


async def test_mint_endpoint_refuses_malformed_requests(world: World) -> None:
    """The mint endpoint answers 400 code 3 for a body that is not an object or lacks sub."""
    for body in ([1, 2], {"aud": "x"}, {"sub": "s", "lifetime": -1}):
        async with world.http.post(world.url + "/emulator/v1/mint", json=body) as r:
            assert r.status == 400, body
            assert (await r.json())["code"] == 3


async def test_mint_for_a_platform_uses_its_subject_unless_one_is_given(world: World) -> None:
    """A platform mint without sub (or with null, as older `emulate mint` sent) carries the platform's own
    subject; with sub, that subject and still the platform's issuer."""
    from tokenrelay.emulator.platforms.registry import PLATFORMS

    gitlab = PLATFORMS["gitlab"]
    for body, subject in (
        ({"platform": "gitlab"}, gitlab.claims(world.url)["sub"]),
        ({"platform": "gitlab", "sub": None}, gitlab.claims(world.url)["sub"]),
        ({"platform": "gitlab", "sub": "project_path:mine/app:ref_type:tag:ref:v1"}, None),
    ):
        async with world.http.post(world.url + "/emulator/v1/mint", json=body) as r:
            assert r.status == 200, body
            claims = jwt.decode((await r.json())["token"], options={"verify_signature": False})
        assert (claims["iss"], claims["sub"]) == (gitlab.issuer, subject or body["sub"])
