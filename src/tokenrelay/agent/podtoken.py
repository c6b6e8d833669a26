"""Who is asking: a pod's projected service-account token, verified locally and completely.

Signature against the cluster's keys, issuer, audience, ``exp``/``nbf``, then the claims a bound pod
token carries (``kubernetes.io.pod``, ``kubernetes.io.node``): the node must be this one, and the
pod must still run here (``NodePods``). No TokenReview, no call out per request. Each failed check
has its own reason, ``POD_TOKEN_<CHECK>``, and a message that says what to fix.

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


class Refused(Exception):
    """The pod's token failed ``check``; the message says which check and what to do."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(message)
        self.check = check
        self.message = message

    @property
    def reason(self) -> str:
        return "POD_TOKEN_" + self.check


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
        """The pod token of an ``Authorization`` header value; raises Refused."""
        scheme, _, value = (authorization or "").partition(" ")
        value = value.strip()
        if scheme.lower() != "bearer" or not value:
            raise Refused(
                "MISSING",
                "no pod token: send the pod's projected service-account token as Authorization: "
                "Bearer (TOKENRELAY_AGENT_TOKEN_FILE names its file)",
            )
        kept = self._verified.get(value)
        if kept is not None:
            known, signer = kept
            if known.expires + LEEWAY <= self._wall():
                del self._verified[value]
                raise Refused("EXPIRED", "the pod token has expired: kubelet should have renewed its file")
            if self._keys.publishes(signer):
                return known
            del self._verified[value]  # its key is retired: the token is checked afresh (and refused)
        if len(value) > MAX_TOKEN_BYTES:
            raise Refused("MALFORMED", "the pod token is over 16 KiB: not a service-account token")
        try:
            header = jwt.get_unverified_header(value)
        except jwt.InvalidTokenError:  # bad base64, a header that is not JSON, a kid that is no string
            raise Refused("MALFORMED", "the pod token is not a JWT") from None
        kid = header.get("kid")
        key = await self._keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise Refused("SIGNATURE", "the pod token is signed with a key that is not the cluster's")
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
            raise Refused("SIGNATURE", "the pod token's signature is not the cluster's") from None
        except jwt.ExpiredSignatureError:
            raise Refused(
                "EXPIRED", "the pod token has expired: kubelet should have renewed its file"
            ) from None
        except jwt.ImmatureSignatureError:
            raise Refused("NOT_YET_VALID", "the pod token is not valid yet (nbf/iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise Refused(
                "AUDIENCE",
                f"the pod token's audience is not {self._audience}: project the token with that "
                "audience (the agent's --pod-token-audience)",
            ) from None
        except jwt.InvalidIssuerError:
            raise Refused("ISSUER", f"the pod token was not issued by {self._issuer}") from None
        except jwt.MissingRequiredClaimError as exc:  # every service-account token has exp, iss, aud
            raise Refused("MALFORMED", f"the pod token has no {exc.claim!r} claim") from None
        except jwt.InvalidTokenError as exc:
            raise Refused("MALFORMED", f"the pod token cannot be read: {type(exc).__name__}") from None
        audiences = claims["aud"]
        if not isinstance(audiences, str) and len(audiences) != 1:
            # A token for several audiences is also good at the others, which could replay it here:
            # the token service's audience must be the token's only one, as a projected volume makes it.
            raise Refused(
                "AUDIENCE",
                f"the pod token carries {len(audiences)} audiences: project it for {self._audience} "
                "alone (the agent's --pod-token-audience)",
            )
        return claims

    def _pod(self, value: str, claims: dict[str, Any]) -> PodToken:
        k8s = claims.get("kubernetes.io")
        k8s = k8s if isinstance(k8s, dict) else {}
        pod = _object(k8s, "pod")
        node = _object(k8s, "node")
        account = _object(k8s, "serviceaccount")
        namespace = k8s.get("namespace")
        if not (pod and account and isinstance(namespace, str)):
            raise Refused(
                "CLAIMS",
                "the pod token is not bound to a pod: mount a projected service-account token "
                "(serviceAccountToken volume), not a Secret's token",
            )
        if node is None:
            raise Refused(
                "CLAIMS",
                "the pod token names no node: the API server must issue node claims "
                "(ServiceAccountTokenPodNodeInfo, Kubernetes 1.30 and later)",
            )
        if node["name"] != self._node:
            raise Refused(
                "NODE",
                f"the pod token is of a pod on node {node['name']}, not on {self._node}: "
                "ask the agent of the pod's own node",
            )
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
