"""Who is asking: a pod's projected service-account token, verified locally and completely.

Signature against the cluster's keys, issuer, audience, ``exp``/``nbf``, then the claims a bound pod
token carries (``kubernetes.io.pod``, ``kubernetes.io.node``): the node must be this one, and the
pod must still run here (``NodePods``). No TokenReview, no call out per request. Each failed check
has its own reason, ``POD_TOKEN_<CHECK>``, and a message that says what to fix (``refusals``).

A pod sends the same token for minutes (kubelet renews it at 80% of its life), so the signature
and claims of a token are checked once and the result kept (bounded, by the token's whole value);
its expiry, and that the cluster still publishes the key it was signed with, are checked again on
every request, and the caller checks the pod on every request.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt

from . import refusals
from .jwks import ClusterKeys

# RSA and EC keys are what kube-apiserver's --service-account-signing-key-file may hold.
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"]
LEEWAY = 5.0  # seconds of clock difference between this node and the API server
MAX_TOKEN_BYTES = 16 * 1024
MAX_VERIFIED = 4096  # tokens whose verification is kept: a node's pods, each with a token or two


@dataclass(frozen=True, slots=True)
class PodToken:
    """A verified pod token and what it says."""

    value: str = field(repr=False)
    namespace: str
    service_account: str
    pod_name: str
    pod_uid: str
    node: str
    expires: float  # Unix time

    @property
    def account(self) -> tuple[str, str]:
        return self.namespace, self.service_account


class Verifier:
    """Checks a pod's token against the cluster's keys and this node."""

    def __init__(
        self,
        keys: ClusterKeys,
        *,
        issuer: str,
        audience: str,
        node: str,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._keys = keys
        self._issuer = issuer
        self._audience = audience
        self._node = node
        self._wall = wall
        # by the token's whole value: what it says, and the key its signature was checked with
        self._verified: OrderedDict[str, tuple[PodToken, jwt.PyJWK]] = OrderedDict()

    async def verify(self, authorization: str | None) -> PodToken:
        """The pod token of an ``Authorization`` header value; raises ``refusals.Refused``."""
        scheme, _, value = (authorization or "").partition(" ")
        value = value.strip()
        if scheme.lower() != "bearer" or not value:
            raise refusals.MISSING.refuse()
        kept = self._verified.get(value)
        if kept is not None:
            known, signer = kept
            if known.expires + LEEWAY <= self._wall():
                del self._verified[value]
                raise refusals.EXPIRED.refuse()
            if self._keys.publishes(signer):
                return known
            del self._verified[value]  # its key is retired: the token is checked afresh (and refused)
        if len(value) > MAX_TOKEN_BYTES:
            raise refusals.TOO_LARGE.refuse()
        try:
            header = jwt.get_unverified_header(value)
        except jwt.InvalidTokenError:  # bad base64, a header that is not JSON, a kid that is no string
            raise refusals.NOT_A_JWT.refuse() from None
        kid = header.get("kid")
        key = await self._keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise refusals.FOREIGN_KEY.refuse()
        pod = self._pod(value, self._decode(value, key))
        self._verified[value] = (pod, key)
        if len(self._verified) > MAX_VERIFIED:
            self._verified.popitem(last=False)
        return pod

    def _decode(self, value: str, key: jwt.PyJWK) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                value,
                key,
                algorithms=ALGORITHMS,
                audience=self._audience,
                issuer=self._issuer,
                leeway=LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.InvalidSignatureError:
            raise refusals.BAD_SIGNATURE.refuse() from None
        except jwt.ExpiredSignatureError:
            raise refusals.EXPIRED.refuse() from None
        except jwt.ImmatureSignatureError:
            raise refusals.NOT_YET_VALID.refuse() from None
        except jwt.InvalidAudienceError:
            raise refusals.WRONG_AUDIENCE.refuse(audience=self._audience) from None
        except jwt.InvalidIssuerError:
            raise refusals.WRONG_ISSUER.refuse(issuer=self._issuer) from None
        except jwt.MissingRequiredClaimError as exc:  # every service-account token has exp, iss, aud
            raise refusals.NO_CLAIM.refuse(claim=exc.claim) from None
        except jwt.InvalidTokenError as exc:
            raise refusals.UNREADABLE.refuse(error=type(exc).__name__) from None
        audiences = claims["aud"]
        if not isinstance(audiences, str) and len(audiences) != 1:
            # A token for several audiences is also good at the others, which could replay it here:
            # the token service's audience must be the token's only one, as a projected volume makes it.
            raise refusals.AUDIENCES.refuse(count=len(audiences), audience=self._audience)
        return claims

    def _pod(self, value: str, claims: dict[str, Any]) -> PodToken:
        k8s = claims.get("kubernetes.io")
        k8s = k8s if isinstance(k8s, dict) else {}
        pod = _object(k8s, "pod")
        node = _object(k8s, "node")
        account = _object(k8s, "serviceaccount")
        namespace = k8s.get("namespace")
        if not (pod and account and isinstance(namespace, str)):
            raise refusals.UNBOUND.refuse()
        if node is None:
            raise refusals.NO_NODE.refuse()
        if node["name"] != self._node:
            raise refusals.OTHER_NODE.refuse(node=node["name"], here=self._node)
        return PodToken(
            value,
            namespace,
            account["name"],
            pod["name"],
            pod["uid"],
            node["name"],
            float(claims["exp"]),
        )


def _object(claims: dict[str, Any], name: str) -> dict[str, str] | None:
    """``{"name", "uid"}`` of a bound object's claim, when both are strings."""
    found = claims.get(name)
    if isinstance(found, dict) and isinstance(found.get("name"), str) and isinstance(found.get("uid"), str):
        return {"name": found["name"], "uid": found["uid"]}
    return None
