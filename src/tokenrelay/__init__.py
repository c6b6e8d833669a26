"""tokenrelay: exchange a workload's OIDC token for an API token, keep it fresh, serve it locally."""

from ._version import __version__
from .errors import (
    ConfigError,
    ExchangeError,
    IdTokenError,
    TokenRelayError,
    TokenUnavailable,
    UnknownAudience,
)

__all__ = [
    "ConfigError",
    "ExchangeError",
    "IdTokenError",
    "TokenRelayError",
    "TokenUnavailable",
    "UnknownAudience",
    "__version__",
]
