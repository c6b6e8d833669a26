"""Every error tokenrelay raises on purpose.

The tree::

    TokenRelayError                 base; ``retryable``: may trying again later help; ``retry_after``
    ├── ConfigError                 bad settings: names the flag and the environment variable (exit 2)
    ├── IdTokenError                the platform's OIDC token cannot be read or is unusable
    │   └── IdTokenExpired          it is there, but expired: whatever writes it stopped renewing it
    ├── ExchangeError               the token service refused or failed an exchange
    │   └── ExchangeTimeout         it did not answer in time
    ├── TokenUnavailable            no valid API token for an audience right now (the local API: 503)
    ├── UnknownAudience             an audience that is not configured (the local API: 404)
    ├── SinkError                   a --token-file could not be written
    ├── LocalApiError               the sidecar's socket gave no token (``tokenrelay token``, the helpers)
    ├── InjectionRefused            a pod the Kubernetes injector cannot inject as it stands (kube/)
    └── CredentialError             a credential helper has no token to hand out
        ├── HostsError              the helpers' host list is malformed
        ├── InputError              git sent input the git helper cannot read
        └── RequestError            kubelet sent a request the kubelet provider cannot read

``retryable`` of an ExchangeError is decided once, in ``stsanswer``, where the token service's answer
is read: unreachable, timed out, a 5xx or a 429 may pass; a refusal waits for someone to change a
configuration. The provider's backoff and ``--once`` both read it. The HTTP status and AIP-193 code
served for an error are chosen where answers are built (``localapi``, ``proxy.answers``), not here.

The emulator's ``ApiError`` stands apart on purpose: it is the emulated upstream's answer, not an
error of tokenrelay's. Messages are written for the person who has to act: they say what to fix,
and never contain a token. Standard library only, with no import at all: the credential helpers
raise these.
"""


class TokenRelayError(Exception):
    """Base of tokenrelay's errors."""

    retryable: bool = False
    retry_after: float | None = None  # seconds the other side asked us to wait, when it said

    @property
    def message(self) -> str:
        return str(self)


class ConfigError(TokenRelayError):
    """A setting is missing or malformed. The message names the flag and the environment variable."""


class IdTokenError(TokenRelayError):
    """The platform's OIDC token is missing, empty, expired or unreadable.

    Retryable: kubelet or the CI runner may write a fresh one at any moment.
    """

    retryable = True


class IdTokenExpired(IdTokenError):
    """The platform's OIDC token was read, and has expired: the fix is its renewal, not its place."""


class ExchangeError(TokenRelayError):
    """The token service did not give us a token.

    ``code``/``reason`` come from the service's AIP-193 body when it sent one, so a refusal reads as
    "identity does not match the token's subject", not as "HTTP 403". ``retryable`` defaults to True:
    a failure with no answer to read (unreachable, timed out, garbled) is one of the moment.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: int | None = None,
        reason: str = "",
        retryable: bool = True,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after


class ExchangeTimeout(ExchangeError):
    """The token service did not answer within the timeout."""


class TokenUnavailable(TokenRelayError):
    """No valid token for an audience; ``message`` says why (usually the last exchange's error)."""

    retryable = True


class UnknownAudience(TokenRelayError):
    """A caller asked for an audience that tokenrelay was not configured to keep fresh."""


class InjectionRefused(TokenRelayError):
    """``tokenrelay inject`` or ``tokenrelay webhook`` cannot add the sidecar to a pod as it stands.

    The message lists every reason at once, each naming the annotation, container, volume or port to
    change; the webhook answers it as the pod's admission denial.
    """


class SinkError(TokenRelayError):
    """A token file could not be written; the message names the file and the cause."""


class LocalApiError(TokenRelayError):
    """The sidecar could not be reached or gave no token; the message says what to do.

    ``status`` is the local API's HTTP status when it answered (None when nothing answered), with
    the AIP-193 ``reason`` it gave.
    """

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class CredentialError(TokenRelayError):
    """No token could be had; the message says what to fix and never holds a secret."""


class HostsError(CredentialError):
    """The host list is malformed; the message names where it came from and what to fix."""


class InputError(CredentialError):
    """stdin is not git's key=value format."""


class RequestError(CredentialError):
    """kubelet's request is not one this provider understands."""
