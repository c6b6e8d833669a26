"""ES256 signing keys and the platform OIDC issuer the emulator stands in for.

Two keys, never mixed: the *platform* key signs OIDC tokens (what kubelet or GitHub Actions would
hand a workload) and is published in the issuer's JWKS; the *token service* key signs API tokens.
Keys are made once with ``cryptography`` and kept in the store, so with ``--state`` they survive a
restart. Signing uses the loaded key object: no key parsing per request.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from ..iam.store import Store

DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/.well-known/jwks.json"


class SigningKey:
    """An ES256 private key with its ``kid`` (a hash of the public key)."""

    def __init__(self, private: ec.EllipticCurvePrivateKey) -> None:
        self.private = private
        self.public = private.public_key()
        jwk: dict[str, Any] = json.loads(ECAlgorithm.to_jwk(self.public))
        der = self.public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.kid = hashlib.sha256(der).hexdigest()[:16]
        self.jwk = {**jwk, "kid": self.kid, "use": "sig", "alg": "ES256"}

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def stored(cls, store: Store, name: str) -> SigningKey:
        """The key called ``name`` in the store, made and saved on first use."""
        pem = store.key(name)
        if pem is not None:
            private = serialization.load_pem_private_key(pem, password=None)
            if isinstance(private, ec.EllipticCurvePrivateKey):
                return cls(private)
        key = cls.generate()
        store.put_key(
            name,
            key.private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        return key

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.private, algorithm="ES256", headers={"kid": self.kid, "typ": "JWT"})


class Issuer:
    """The platform's OIDC issuer: discovery document, JWKS, and minting of workload tokens."""

    def __init__(self, key: SigningKey, url: Callable[[], str], wall: Callable[[], float] = time.time):
        self.key = key
        self._url = url  # known only once the server has bound its port
        self._wall = wall

    @property
    def url(self) -> str:
        return self._url()

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": self.url + JWKS_PATH,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "claims_supported": ["iss", "sub", "aud", "iat", "nbf", "exp", "jti"],
        }

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.key.jwk]}

    def mint(
        self, subject: str, audience: str, lifetime: float = 3600.0, extra: dict[str, Any] | None = None
    ) -> str:
        """A platform OIDC token for ``subject``, like a projected service-account token."""
        now = int(self._wall())
        claims: dict[str, Any] = {
            "iss": self.url,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now + _seconds(lifetime),
            "jti": secrets.token_hex(8),
        }
        claims.update(extra or {})
        return self.key.sign(claims)


def _seconds(value: float) -> int | float:
    """Whole seconds stay integers in the claims, as most issuers write them."""
    return int(value) if float(value).is_integer() else value
