"""What every credential helper hands out: a ``Credential``, the ``CredentialError`` (drawn in
``errors``' tree) when it cannot, and the one username clients are told.

A leaf: it imports only ``errors``, so ``source`` (the sidecar's socket) and ``fallback`` (the direct
exchange) both build on it without importing each other at import time.
"""

from __future__ import annotations

from ..errors import CredentialError

__all__ = ["USERNAME", "Credential", "CredentialError"]

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: every helper run imports this module
if TYPE_CHECKING:
    from typing import Protocol

    class Exchange(Protocol):
        """The direct exchange: the API token and the service's stated expiry (Unix time), if any.
        Keyword-only, because ``auth_url``, ``audience`` and ``identity`` are all strings."""

        def __call__(
            self, *, auth_url: str, audience: str, identity: str, id_token: str, timeout: float
        ) -> tuple[str, float | None]: ...


# Not "<token>": that would make clients start an OAuth2 refresh-token grant.
USERNAME = "_token"


class Credential:
    """A token and, when known, its expiry; the timing is read from the token only when asked."""

    __slots__ = ("_expire_time", "token")

    def __init__(self, token: str, expire_time: str | None = None) -> None:
        self.token = token
        self._expire_time = expire_time  # ISO 8601, as the local API sends it

    def __repr__(self) -> str:
        return f"Credential(expire_time={self._expire_time!r})"

    def times(self) -> tuple[float | None, float | None]:
        """``(issued_at, expires_at)`` as Unix times, each None when unknown."""
        from ..lite.jwtclaims import numeric_claim, unverified_claims

        claims = unverified_claims(self.token) or {}
        issued, expires = numeric_claim(claims, "iat"), numeric_claim(claims, "exp")
        if expires is None and self._expire_time:
            from ..lite.timestamps import parse_timestamp

            try:
                expires = parse_timestamp(self._expire_time)
            except ValueError:
                expires = None
        return issued, expires
