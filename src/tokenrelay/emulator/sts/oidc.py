"""Verify a platform OIDC token the way a token service does: by its issuer's discovery and JWKS.

The emulator's own issuer is checked against its key in memory (the same key its JWKS publishes:
fetching our own document over HTTP would only cost a round trip). Any other issuer must be listed
with ``--trust-issuer``; its keys come from its discovery document and JWKS over HTTP, or, for an
issuer whose discovery nobody can reach (a cluster's ``https://kubernetes.default.svc``), from a JWKS
given beside it: ``ISSUER=FILE`` or ``ISSUER=JWKS_URL``. Keys are kept for five minutes in a TTL
cache, and fetched (or read) again at once when a token names a ``kid`` not seen yet (key rotation).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jwt
from cachetools import TTLCache

from ..errors import STS_DOMAIN, ApiError, unauthenticated, unavailable
from .issuer import DISCOVERY_PATH, Issuer

JWKS_TTL = 300.0
FETCH_TIMEOUT = 5.0
# Asymmetric algorithms only: "none" and HMAC (with a public key as the secret) are classic forgeries.
ALGORITHMS = ["ES256", "ES384", "RS256", "RS384", "RS512", "PS256", "EdDSA"]


def _bad(message: str) -> ApiError:
    return unauthenticated(message, STS_DOMAIN)


def normalize(url: str) -> str:
    return url.rstrip("/")


@dataclass(frozen=True)
class TrustedIssuer:
    """One ``--trust-issuer``: the issuer's URL (``iss``), and where its JWKS is when not at its
    discovery document: a file or an http(s) URL."""

    issuer: str
    jwks: str | None = None

    @classmethod
    def parse(cls, text: str) -> TrustedIssuer:
        """``ISSUER``, ``ISSUER=FILE`` or ``ISSUER=JWKS_URL``; ValueError saying what is wrong."""
        issuer, separator, jwks = text.partition("=")
        if not issuer.startswith(("https://", "http://")):
            raise ValueError(f"{issuer!r} is not an issuer URL (https://...)")
        if separator and not jwks:
            raise ValueError(f"{text!r}: nothing after '='; give ISSUER=FILE or ISSUER=JWKS_URL")
        if separator and not jwks.startswith(("https://", "http://")):
            try:
                jwt.PyJWKSet.from_dict(json.loads(Path(jwks).read_bytes()))
            except (OSError, ValueError, jwt.PyJWTError) as exc:
                raise ValueError(f"{jwks} is not a readable JWKS file ({type(exc).__name__})") from None
        return cls(normalize(issuer), jwks or None)


class OidcVerifier:
    """Checks signature, ``exp`` and issuer of OIDC tokens; answers their claims."""

    def __init__(
        self,
        own: Issuer,
        trusted: Iterable[str | TrustedIssuer] = (),
        *,
        session: Callable[[], aiohttp.ClientSession],
        wall: Callable[[], float] = time.time,
        played: frozenset[str] = frozenset(),
    ) -> None:
        self._own = own
        given = [TrustedIssuer.parse(t) if isinstance(t, str) else t for t in trusted]
        self.trusted = {t.issuer for t in given}
        self._jwks = {t.issuer: t.jwks for t in given if t.jwks is not None}
        # the platforms' issuers the emulator plays (platforms/), signed with its own key, unless
        # the real issuer is trusted by name
        self._played = played - self.trusted
        self._session = session
        self._wall = wall
        self._keys: TTLCache[str, dict[str, jwt.PyJWK]] = TTLCache(maxsize=64, ttl=JWKS_TTL)

    async def verify(self, token: str, also_trusted: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The verified claims; ``also_trusted`` adds issuers (identity providers) for this token."""
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except (jwt.PyJWTError, ValueError, TypeError):
            raise _bad("Unauthenticated: the OIDC token is not a JWT") from None
        issuer = unverified.get("iss")
        if not isinstance(issuer, str):
            raise _bad("Unauthenticated: the OIDC token has no iss claim")
        kid = header.get("kid")
        key = await self._key(normalize(issuer), kid if isinstance(kid, str) else None, also_trusted)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                # time claims are checked below on the emulator's injectable wall clock, not pyjwt's
                options={
                    "verify_aud": False,
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                    "require": ["iss", "sub", "exp"],
                },
            )
        except jwt.InvalidSignatureError:
            raise _bad("Unauthenticated: the OIDC token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise _bad(f"Unauthenticated: the OIDC token is not valid: {type(exc).__name__}") from None
        now = self._wall()
        exp, nbf = claims["exp"], claims.get("nbf", 0)
        if not isinstance(exp, int | float) or isinstance(exp, bool) or not exp > now:
            raise _bad("Unauthenticated: the OIDC token has expired")
        if isinstance(nbf, int | float) and nbf > now + 60:
            raise _bad("Unauthenticated: the OIDC token is not valid yet (nbf)")
        return claims

    async def _key(self, issuer: str, kid: str | None, also_trusted: frozenset[str]) -> Any:
        if issuer == normalize(self._own.url) or issuer in self._played:
            if kid not in (None, self._own.key.kid):
                raise _bad("Unauthenticated: the OIDC token is signed by a key its issuer does not publish")
            return self._own.key.public
        if issuer not in self.trusted and issuer not in also_trusted:
            raise _bad(f"Unauthenticated: the OIDC token's issuer {issuer} is not trusted")
        keys = self._keys.get(issuer)
        if keys is None or (kid is not None and kid not in keys):
            keys = await self._fetch(issuer)
            self._keys[issuer] = keys
        if kid is None and len(keys) == 1:
            return next(iter(keys.values())).key
        if kid is None or kid not in keys:
            raise _bad("Unauthenticated: the OIDC token is signed by a key its issuer does not publish")
        return keys[kid].key

    async def _fetch(self, issuer: str) -> dict[str, jwt.PyJWK]:
        session = self._session()
        timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT)
        jwks_uri = self._jwks.get(issuer)
        try:
            if jwks_uri is None:
                async with session.get(issuer + DISCOVERY_PATH, timeout=timeout, allow_redirects=False) as r:
                    r.raise_for_status()
                    discovery = await r.json(content_type=None)
                jwks_uri = discovery.get("jwks_uri") if isinstance(discovery, dict) else None
                if not isinstance(jwks_uri, str):
                    raise ValueError("no jwks_uri")
            if jwks_uri.startswith(("https://", "http://")):
                async with session.get(jwks_uri, timeout=timeout, allow_redirects=False) as r:
                    r.raise_for_status()
                    document = await r.json(content_type=None)
            else:  # a file the user keeps (kubectl get --raw /openid/v1/jwks), read again on a new kid
                document = json.loads(await asyncio.to_thread(Path(jwks_uri).read_bytes))
            keyset = jwt.PyJWKSet.from_dict(document)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, jwt.PyJWTError) as exc:
            raise unavailable(
                f"Unavailable: cannot read the keys of issuer {issuer}: {type(exc).__name__}"
            ) from None
        return {key.key_id or "": key for key in keyset.keys}
