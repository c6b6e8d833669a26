"""What every credential helper hands out: a ``Credential``, the ``CredentialError`` (drawn in
``errors``' tree) when it cannot, and the one username clients are told.

A leaf: it imports nothing at all, so ``source`` (the sidecar's socket) and ``fallback`` (the direct
exchange) both build on it without importing each other at import time. ``CredentialError`` is
handed on from ``errors`` on first use (PEP 562): a helper's successful run never loads ``errors``.
"""

__all__ = ["USERNAME", "Credential", "CredentialError"]

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: every helper run imports this module
if TYPE_CHECKING:
    from typing import Protocol

    from ..errors import CredentialError

    class Exchange(Protocol):
        """The direct exchange: the API token and the service's stated expiry (Unix time), if any.
        Keyword-only, because ``auth_url``, ``audience`` and ``identity`` are all strings."""

        def __call__(
            self, *, auth_url: str, audience: str, identity: str, id_token: str, timeout: float
        ) -> tuple[str, float | None]: ...


def __getattr__(name: str) -> object:
    if name == "CredentialError":
        from ..errors import CredentialError

        return CredentialError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def credential_error(message: str) -> "CredentialError":
    """A CredentialError, ``errors`` imported only now that one is raised."""
    from ..errors import CredentialError

    return CredentialError(message)


# Not "<token>": that would make clients start an OAuth2 refresh-token grant.
USERNAME = "_token"


class Credential:
    """A token and, when the sidecar or the token service stated it, its expiry (Unix time). Its
    timing is read from the token itself only when asked."""

    __slots__ = ("expires_at", "token")

    def __init__(self, token: str, expires_at: float | None = None) -> None:
        self.token = token
        self.expires_at = expires_at

    def __repr__(self) -> str:
        return f"Credential(expires_at={self.expires_at!r})"

    def times(self) -> tuple[float | None, float | None]:
        """``(issued_at, expires_at)`` as Unix times, each None when unknown: the token's own ``iat``
        and ``exp`` (one clock, the token service's, for a caller that computes with both), else the
        stated expiry."""
        from ..lite.jwtclaims import numeric_claim, unverified_claims

        claims = unverified_claims(self.token) or {}
        expires = numeric_claim(claims, "exp")
        return numeric_claim(claims, "iat"), self.expires_at if expires is None else expires

    def expiry(self) -> float | None:
        """When to stop using the token (Unix time, None when unknown): the stated expiry, which is
        on this machine's clock and needs no decoding, else the token's ``exp``."""
        return self.expires_at if self.expires_at is not None else self.times()[1]
