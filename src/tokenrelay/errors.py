"""Every error tokenrelay raises on purpose.

The tree::

    TokenRelayError                 base; ``retryable`` says whether trying again later may help
    ├── ConfigError                 bad settings: names the flag and the environment variable (exit 2)
    ├── IdTokenError                the platform's OIDC token cannot be read or is unusable
    ├── ExchangeError               the token service refused or failed an exchange
    │   └── ExchangeTimeout         it did not answer in time
    ├── TokenUnavailable            no valid API token for an audience right now (served as 503)
    ├── UnknownAudience             an audience that is not configured (served as 404)
    └── InjectionRefused            a pod the Kubernetes injector cannot inject as it stands (kube/)

Messages are written for the person who has to act: they say what to fix, and never contain a token.
"""

from __future__ import annotations

from .aip193 import Code


class TokenRelayError(Exception):
    """Base of tokenrelay's errors."""

    retryable: bool = False

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


class ExchangeError(TokenRelayError):
    """The token service did not give us a token.

    ``code``/``reason`` come from the service's AIP-193 body when it sent one, so a refusal reads as
    "identity does not match the token's subject", not as "HTTP 403".
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

    @property
    def transient(self) -> bool:
        """A failure of the moment (unreachable, timed out, 5xx, 429), not a refusal to fix."""
        return self.status is None or self.status >= 500 or self.status == 429


class ExchangeTimeout(ExchangeError):
    """The token service did not answer within the timeout."""


class TokenUnavailable(TokenRelayError):
    """No valid token for an audience; ``message`` says why (usually the last exchange's error)."""

    retryable = True
    code = Code.UNAVAILABLE
    reason = "TOKEN_UNAVAILABLE"


class UnknownAudience(TokenRelayError):
    """A caller asked for an audience that tokenrelay was not configured to keep fresh."""

    code = Code.NOT_FOUND
    reason = "AUDIENCE_NOT_CONFIGURED"


class InjectionRefused(TokenRelayError):
    """``tokenrelay inject`` or ``tokenrelay webhook`` cannot add the sidecar to a pod as it stands.

    The message lists every reason at once, each naming the annotation, container, volume or port to
    change; the webhook answers it as the pod's admission denial.
    """
