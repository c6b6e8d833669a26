"""Where a helper gets its token: the sidecar's socket, else a direct exchange when one is configured.

The socket is ``TOKENRELAY_SOCKET`` (default: where ``tokenrelay run`` listens). When no sidecar
answers there and ``TOKENRELAY_AUTH_URL``, ``TOKENRELAY_IDENTITY`` and an OIDC source are set, the
helper exchanges by itself (see ``fallback``). A sidecar that answers with a refusal is the
authority: its refusal is reported, not worked around.
"""

from __future__ import annotations

from ..lite.procenv import environ as process_environ
from ..lite.socketclient import LocalApiError, fetch_token, fetch_token_text, socket_path
from .credential import Credential, CredentialError

__all__ = ["Credential", "CredentialError", "fetch", "fetcher"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# The sidecar waits up to its --wait-timeout (10 s by default) when it holds no token yet.
SOCKET_TIMEOUT = 15.0


def fetch(audience: str, environ: Mapping[str, str] | None = None, *, expiry: bool = True) -> Credential:
    """A token for ``audience``; raises CredentialError.

    ``expiry=False`` asks the sidecar for the bare token: quicker to decode, for a caller that never
    asks the credential's ``times()`` (which then reads them from the token alone).
    """
    env = process_environ() if environ is None else environ
    path = socket_path(environ=env)
    try:
        if not expiry:
            return Credential(fetch_token_text(path, audience, timeout=SOCKET_TIMEOUT))
        reply = fetch_token(path, audience, timeout=SOCKET_TIMEOUT)
    except LocalApiError as exc:
        if exc.status is not None:
            raise CredentialError(f"the tokenrelay sidecar at {path} has no token: {exc}") from None
        from . import direct as fallback

        if fallback.configured(env):
            return fallback.fetch(audience, env)
        raise CredentialError(f"{exc}; {fallback.HINT}") from None
    return Credential(reply.token, reply.expire_time)


def fetcher(environ: Mapping[str, str] | None, *, expiry: bool = True) -> Callable[[str], Credential]:
    """``fetch`` bound to an environment, the default of every helper's ``handle``."""
    return lambda audience: fetch(audience, environ, expiry=expiry)
