"""The token service: ``/sts/exchange`` trades a platform OIDC token for an API token.

Checks, in this order, each with its documented code: the fields are present (3 INVALID_ARGUMENT),
the OIDC token verifies — issuer trusted (the emulator's own, ``--trust-issuer``, or an identity
provider of the identity's group or above), signature, ``exp`` — and is meant for this token service
(its ``aud`` names the emulator's URL) (16 UNAUTHENTICATED), the identity exists (5 NOT_FOUND), and its
``claimMatch`` names the token's ``iss`` and ``sub`` (7 PERMISSION_DENIED). Each claim refusal names
the claim, in the message and in the ErrorInfo's ``metadata.claim``. The API token is an ES256 JWT
with ``iss``, ``sub`` (the identity's uid), ``aud``, ``iat`` and ``exp``; the API accepts only tokens
signed by this service's own key, for an identity that still exists.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import jwt
from cachetools import TTLCache

from ..errors import STS_DOMAIN, invalid_arguments, not_found, permission_denied, unauthenticated
from ..iam.store import Store
from .issuer import SigningKey
from .oidc import OidcVerifier, normalize

STS_PATH = "/sts"  # API tokens name {base_url}/sts as their issuer, apart from the platform issuer


class TokenService:
    """Exchanges OIDC tokens for API tokens, and verifies API tokens for the API."""

    def __init__(
        self,
        store: Store,
        key: SigningKey,
        verifier: OidcVerifier,
        base_url: Callable[[], str],
        *,
        audiences: Callable[[], frozenset[str]] = frozenset,
        trusted_for: Callable[[str], frozenset[str]] = lambda identity_uid: frozenset(),
        lifetime: float = 3600.0,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.key = key
        self._verifier = verifier
        self._base_url = base_url
        self._audiences = audiences
        self._trusted_for = trusted_for
        self.lifetime = lifetime
        self._wall = wall
        # A verified API token's (sub, aud, exp): a busy client presents the same token many times
        # and an ES256 verification costs more than the rest of a small request.
        self._verified: TTLCache[str, tuple[str, str, float]] = TTLCache(maxsize=4096, ttl=300)

    @property
    def issuer(self) -> str:
        return self._base_url() + STS_PATH

    async def exchange(self, bearer: str | None, audience: str | None, identity_uid: str | None) -> str:
        """An API token for ``identity_uid`` and ``audience``; raises ApiError."""
        missing = [
            (name, "required") for name, value in (("aud", audience), ("identity", identity_uid)) if not value
        ]
        if missing or audience is None or identity_uid is None:
            raise invalid_arguments(missing, STS_DOMAIN)
        if not bearer:
            raise unauthenticated(
                "Unauthenticated: send the OIDC token as Authorization: Bearer <token>", STS_DOMAIN
            )
        claims = await self._verifier.verify(bearer, self._trusted_for(identity_uid))
        self._check_audience(claims.get("aud"))
        identity = self._store.identities.get(identity_uid)
        if identity is None:
            raise not_found(f"Not found: identity {identity_uid}", STS_DOMAIN)
        if normalize(identity.issuer) != normalize(str(claims["iss"])):
            raise permission_denied(
                f"Permission denied: the OIDC token's iss claim {claims['iss']} is not the claimMatch.issuer "
                f"of identity {identity_uid}",
                STS_DOMAIN,
                claim="iss",
            )
        if identity.subject != claims["sub"]:
            raise permission_denied(
                f"Permission denied: the OIDC token's sub claim is not the claimMatch.subject of identity "
                f"{identity_uid}",
                STS_DOMAIN,
                claim="sub",
            )
        return self.mint(identity_uid, audience)

    def _check_audience(self, aud: Any) -> None:
        """The OIDC token must name this token service (the emulator's URL) in ``aud``."""
        expected = self._audiences()
        named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if any(isinstance(a, str) and normalize(a) in expected for a in named):
            return
        shown = ", ".join(sorted(expected)) or "(none)"
        what = "has no aud claim" if not named else "has an aud claim that does not name this token service"
        raise unauthenticated(
            f"Unauthenticated: the OIDC token {what}; expected audience: {shown}", STS_DOMAIN, claim="aud"
        )

    def mint(self, identity_uid: str, audience: str, lifetime: float | None = None) -> str:
        now = int(self._wall())
        life = self.lifetime if lifetime is None else lifetime
        return self.key.sign(
            {
                "iss": self.issuer,
                "sub": identity_uid,
                "aud": audience,
                "iat": now,
                "exp": now + (int(life) if float(life).is_integer() else life),
                "jti": secrets.token_hex(8),
            }
        )

    def verify(self, token: str, audiences: frozenset[str]) -> str:
        """The identity uid of a live API token meant for one of ``audiences``; raises ApiError (16)."""
        cached = self._verified.get(token)
        if cached is None:
            cached = self._verify_signature(token)
            self._verified[token] = cached
        sub, aud, exp = cached
        if exp <= self._wall():
            raise unauthenticated("Unauthenticated: the API token has expired")
        if normalize(aud) not in audiences:
            raise unauthenticated(f"Unauthenticated: the API token is for audience {aud}, not this API")
        if sub not in self._store.identities:
            raise unauthenticated(f"Unauthenticated: the API token's identity {sub} no longer exists")
        return sub

    def _verify_signature(self, token: str) -> tuple[str, str, float]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self.key.public,
                algorithms=["ES256"],
                issuer=self.issuer,
                options={
                    "verify_aud": False,
                    "verify_exp": False,
                    "verify_iat": False,
                    "require": ["iss", "sub", "aud", "exp"],
                },
            )
        except (jwt.PyJWTError, ValueError, TypeError):
            raise unauthenticated(
                "Unauthenticated: the API token is not one this token service issued"
            ) from None
        sub, aud, exp = claims["sub"], claims["aud"], claims["exp"]
        if (
            not isinstance(sub, str)
            or not isinstance(aud, str)
            or not isinstance(exp, int | float)
            or isinstance(exp, bool)
        ):
            raise unauthenticated("Unauthenticated: the API token is malformed")
        try:
            return sub, aud, float(exp)
        except OverflowError:
            raise unauthenticated("Unauthenticated: the API token is malformed") from None
