"""Registry tokens (the distribution token spec): scopes in, a short-lived signed grant out.

A registry token is an ES256 JWT signed with a key of its own (not the API token key: an API token
never opens the registry, a registry token never opens the API), with ``iss`` = the realm,
``aud`` = the registry's service name, ``sub`` = the identity's uid and ``access`` = the granted
``[{type, name, actions}]``. It lives five minutes, and never past the API token it was traded for.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import jwt
from cachetools import TTLCache

from ..sts.issuer import SigningKey

TOKEN_PATH = "/v2/token"
LIFETIME = 300.0
USERNAME = "_token"
ACTIONS = ("pull", "push", "delete")


@dataclass(frozen=True, slots=True)
class Scope:
    """One requested ``repository:<name>:<actions>``."""

    type: str
    name: str
    actions: tuple[str, ...]

    def text(self) -> str:
        return f"{self.type}:{self.name}:{','.join(self.actions)}"


@dataclass(frozen=True, slots=True)
class Grant:
    """A verified registry token: who, and which actions on which repositories."""

    identity: str
    access: dict[str, frozenset[str]]  # repository name -> actions
    expires: float

    def allows(self, name: str, action: str) -> bool:
        actions = self.access.get(name, frozenset())
        return action in actions or "*" in actions


def parse_scopes(values: Iterable[str]) -> list[Scope]:
    """Every ``type:name:actions`` in the ``scope`` parameters (each may hold several, space-separated).

    Malformed entries are skipped, as the token spec lets a server grant less than was asked.
    """
    scopes = []
    for value in values:
        for item in value.split():
            kind, sep, rest = item.partition(":")
            name, sep2, actions = rest.rpartition(":")
            if sep and sep2 and kind and name:
                scopes.append(Scope(kind, name, tuple(a for a in actions.split(",") if a)))
    return scopes


def basic_credentials(header: str) -> tuple[str, str] | None:
    """``(username, password)`` from ``Authorization: Basic …``, or None."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


class RegistryTokens:
    """Mints and verifies registry tokens for one service."""

    def __init__(
        self,
        key: SigningKey,
        issuer: Callable[[], str],
        *,
        lifetime: float = LIFETIME,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._key = key
        self._issuer = issuer
        self.lifetime = lifetime
        self._wall = wall
        self._verified: TTLCache[str, Grant] = TTLCache(maxsize=4096, ttl=LIFETIME)

    def mint(
        self, identity: str, service: str, access: list[dict[str, Any]], not_after: float
    ) -> tuple[str, int]:
        """A token and its ``expires_in`` (seconds, at least 1)."""
        now = int(self._wall())
        exp = max(now + 1, min(now + int(self.lifetime), int(not_after)))
        token = self._key.sign(
            {
                "iss": self._issuer(),
                "sub": identity,
                "aud": service,
                "iat": now,
                "nbf": now,
                "exp": exp,
                "jti": secrets.token_hex(8),
                "access": access,
            }
        )
        return token, exp - now

    def verify(self, token: str, service: str) -> Grant | None:
        """The grant of a live token for ``service``, or None."""
        grant = self._verified.get(token)
        if grant is None:
            grant = self._decode(token, service)
            if grant is None:
                return None
            self._verified[token] = grant
        return grant if grant.expires > self._wall() else None

    def _decode(self, token: str, service: str) -> Grant | None:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._key.public,
                algorithms=["ES256"],
                issuer=self._issuer(),
                audience=service,
                options={
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                    "require": ["exp", "sub"],
                },
            )
        except jwt.PyJWTError:
            return None
        access: dict[str, frozenset[str]] = {}
        for entry in claims.get("access") or []:
            if (
                isinstance(entry, dict)
                and entry.get("type") == "repository"
                and isinstance(entry.get("name"), str)
            ):
                access[entry["name"]] = frozenset(a for a in entry.get("actions") or [] if isinstance(a, str))
        sub, exp = claims["sub"], claims["exp"]
        if not isinstance(sub, str) or not isinstance(exp, int | float):
            return None
        return Grant(sub, access, float(exp))
