"""Where a helper gets its token: the sidecar's socket, else a direct exchange when one is configured.

The socket is ``TOKENRELAY_SOCKET`` (default: where ``tokenrelay run`` listens). When no sidecar
answers there and ``TOKENRELAY_AUTH_URL``, ``TOKENRELAY_IDENTITY`` and an OIDC source are set, the
helper exchanges by itself (see ``direct``). A sidecar that answers with a refusal is the
authority: its refusal is reported, not worked around. ``errors`` is imported only when the socket
gave no token, so a successful run never loads it; ``CredentialError`` is still handed on from here.
"""

from ..lite import environ as process_environ
from ..lite import socketclient
from ..lite.socketclient import fetch_token_bare, socket_path
from . import Credential, credential_error

__all__ = ["Credential", "CredentialError", "fetch", "fetcher"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..errors import CredentialError

# The sidecar waits up to its --wait-timeout (10 s by default) when it holds no token yet.
SOCKET_TIMEOUT = 15.0


def fetch(audience: str, environ: "Mapping[str, str] | None" = None) -> Credential:
    """A token for ``audience``, with its expiry as the sidecar states it; raises CredentialError."""
    env = process_environ() if environ is None else environ
    path = socket_path(environ=env)
    try:
        token, expires_at = fetch_token_bare(path, audience, timeout=SOCKET_TIMEOUT)
    except socketclient.LocalApiError as exc:  # looked up (and errors loaded) only on a failure
        if exc.status is not None:
            raise credential_error(f"the tokenrelay sidecar at {path} has no token: {exc}") from None
        from . import direct

        if direct.configured(env):
            return direct.fetch(audience, env)
        raise credential_error(f"{exc}; {direct.HINT}") from None
    return Credential(token, expires_at)


def __getattr__(name: str) -> object:
    if name == "CredentialError":  # handed on, as ever, from errors on first use
        from ..errors import CredentialError

        return CredentialError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fetcher(environ: "Mapping[str, str] | None") -> "Callable[[str], Credential]":
    """``fetch`` bound to an environment, the default of every helper's ``handle``."""
    return lambda audience: fetch(audience, environ)
