"""Credential helpers for docker, skopeo, podman, git, pip and kubelet.

Each helper module is a pure ``handle(...) -> exit status`` plus a ``main()`` that wires the real
standard streams. The ``get`` paths import only the standard library: these run once per pull or
fetch, so their start-up time is the user's waiting time.

What every helper shares lives here, in the package every helper imports anyway: a module of its own
would cost each helper run about 0.1 ms. That is what they hand out, a ``Credential``, the
``CredentialError`` (drawn in ``errors``' tree, handed on from there on first use: a successful
run never loads ``errors``) when they cannot, and the one username clients are told; then the one
failure line and the ``main()`` wiring. Importing nothing of the package, it is the leaf that
``source`` (the sidecar's socket) and ``direct`` (the exchange without one) both build on.
"""

import sys

__all__ = [
    "USERNAME",
    "Credential",
    "CredentialError",
    "credential_error",
    "exit_now",
    "failure_line",
    "run_main",
]

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the helpers' start-up
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import NoReturn, Protocol, TextIO

    from ..errors import CredentialError

    class Exchange(Protocol):
        """The direct exchange: the API token and the service's stated expiry (Unix time), if any.
        Keyword-only, because ``auth_url``, ``audience`` and ``identity`` are all strings."""

        def __call__(
            self, *, auth_url: str, audience: str, identity: str, id_token: str, timeout: float
        ) -> tuple[str, float | None]: ...

    class Handle(Protocol):
        def __call__(
            self,
            action: str,
            stdin: TextIO,
            stdout: TextIO,
            *,
            environ: Mapping[str, str] | None = None,
            stderr: TextIO | None = None,
        ) -> int: ...


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


def failure_line(exc: Exception, *, unreadable: str, not_text: str) -> str:
    """The one line a helper prints when ``handle`` fails, the same ladder for every helper: what the
    client sent that cannot be read, what to fix, or an internal error (never a traceback).

    ``unreadable`` says who sent what (``git sent input this helper cannot read``); ``not_text`` is
    the line for input that is not UTF-8.
    """
    from ..errors import CredentialError, InputError, RequestError

    if isinstance(exc, UnicodeDecodeError):
        return f"tokenrelay: {not_text}\n"
    if isinstance(exc, InputError | RequestError):
        return f"tokenrelay: {unreadable}: {exc}\n"
    if isinstance(exc, CredentialError):  # HostsError included
        return f"tokenrelay: {exc}\n"
    return f"tokenrelay: internal error ({type(exc).__name__}); please report it\n"


def run_main(handle: "Handle", action: "str | None" = None) -> int:
    """A helper executable: the action is ``argv[1]`` unless given, the real streams are wired to
    ``handle``.

    Here, in the package every helper imports anyway, so that sharing it costs no import.
    """
    if action is None:
        action = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        return handle(action, sys.stdin, sys.stdout, stderr=sys.stderr)
    except BrokenPipeError:  # the client stopped reading: nothing left to tell it
        return 1
    except KeyboardInterrupt:
        return 130


def exit_now(status: int) -> "NoReturn":
    """End a helper's process with ``status`` once its standard streams are flushed, without the
    interpreter's finalization: tearing down every module and object of a process that is about to
    vanish anyway costs more than a helper's whole ``get`` (1.7 to 1.9 ms here), and the client waits
    for the exit. What a helper leaves behind is its output, which is flushed here; it has no
    threads, no atexit work and no file left open (the direct exchange's cache is written and
    closed before ``handle`` returns). The executables call this; ``run_main`` returns, for tests.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a broken pipe, a closed or absent stream
            if stream is sys.stdout:
                status = status or 1  # the client did not get the answer
    import posix

    posix._exit(status)
