"""What the agent makes of the pod tokens it is shown: unreadable ones, and the checks a token of a
real pod of this node must still pass (issuer, audience, the pod's phase, its deletion)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any

import jwt
import pytest

from ..support.agent import KID, ClusterKey, Pod
from .conftest import RigFactory


def _b64(data: Any) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _claims(key: ClusterKey, pod: Pod, audience: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(key.token(pod, audience), options={"verify_signature": False})
    return claims


def _exp(token: str) -> int:
    return int(jwt.decode(token, options={"verify_signature": False})["exp"])


def _signed(key: ClusterKey, claims: dict[str, Any], header: dict[str, Any]) -> str:
    """``claims`` under ``header``, really signed with the cluster's key (ES256)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    signing_input = f"{_b64(header)}.{_b64(claims)}"
    der = key.private.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


UNREADABLE = {
    "kid a number": lambda key, claims: _signed(key, claims, {"alg": "ES256", "kid": 7}),
    "kid an object": lambda key, claims: _signed(key, claims, {"alg": "ES256", "kid": {"a": 1}}),
    "no exp": lambda key, claims: _signed(
        key, {k: v for k, v in claims.items() if k != "exp"}, {"alg": "ES256", "kid": KID}
    ),
    "exp not a number": lambda key, claims: _signed(
        key, {**claims, "exp": "tomorrow"}, {"alg": "ES256", "kid": KID}
    ),
    "bad base64": lambda key, claims: "!!!." + _b64(claims) + ".c2ln",
    "header not JSON": lambda key, claims: _b64(b"{not json") + "." + _b64(claims) + ".c2ln",
    "header a list": lambda key, claims: _b64(["ES256"]) + "." + _b64(claims) + ".c2ln",
    "alg none": lambda key, claims: _b64({"alg": "none", "kid": KID}) + "." + _b64(claims) + ".",
    "two parts": lambda key, claims: _b64({"alg": "ES256"}) + "." + _b64(claims),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
async def test_an_unreadable_pod_token_is_401_malformed(
    rig_factory: RigFactory, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every unreadable token (a kid that is a number, bad base64, a header that is not JSON, no exp,
    ...) is a 401 POD_TOKEN_MALFORMED, with no error-level log line and no exchange."""
    rig = await rig_factory()
    pod = rig.start_pod(Pod("web-1", "web"))
    token = UNREADABLE[case](rig.key, _claims(rig.key, pod, rig.auth_url))
    with caplog.at_level(logging.DEBUG):
        answer = await rig.ask(pod, token=token)
    assert (answer.status, answer.reason) == (401, "POD_TOKEN_MALFORMED"), answer.body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert rig.service.calls == 0
    assert (await rig.ask(pod)).status == 200  # the agent serves on


async def test_a_deleted_pod_is_refused_at_once(rig_factory: RigFactory) -> None:
    """A pod the watch has reported deleted is refused POD_TOKEN_POD_GONE at once, the agent's clock
    standing still: it does not wait out the newcomer's 5 s as a pod the watch has not seen would."""
    rig = await rig_factory()
    pod = rig.start_pod(Pod("web-1", "web"))
    token = rig.key.token(pod, rig.auth_url)
    assert (await rig.ask(pod, token=token)).status == 200
    rig.delete_pod(pod)
    refused = await asyncio.wait_for(rig.ask(pod, token=token), timeout=10.0)  # a bound, not a timing
    assert (refused.status, refused.reason) == (401, "POD_TOKEN_POD_GONE")


async def test_a_pods_renewed_token_replaces_its_first(rig_factory: RigFactory) -> None:
    """When kubelet renews a pod's token, the account's next refresh uses the renewed one, though
    the first is still valid then."""
    rig = await rig_factory(lifetime=600.0)
    pod = rig.start_pod(Pod("web-1", "web"))
    first = rig.key.token(pod, rig.auth_url, now=rig.clock.wall(), life=400)
    assert (await rig.ask(pod, token=first)).status == 200
    await rig.advance(100.0)
    renewed = rig.key.token(pod, rig.auth_url, life=3600)  # iat now: PyJWT checks it on the real clock
    assert (await rig.ask(pod, token=renewed)).status == 200
    calls = rig.service.calls
    await rig.advance(250.0)  # the service's token (600 s) is refreshed at 45-50% of its life
    assert rig.service.calls > calls
    used, wanted = _exp(rig.service.seen_id_tokens[-1]), _exp(renewed)
    assert used == wanted  # expiries, not tokens, in a failure
