"""tokenrelay: exchange a workload's OIDC token for an API token, keep it fresh, serve it locally."""

from ._version import __version__

# Every credential helper run imports this package first; the error classes pull in errors, aip193,
# enum and json, so they are loaded on first use (PEP 562) rather than here.
TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the helpers' start-up
if TYPE_CHECKING:
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


def __getattr__(name: str) -> object:
    if name in __all__:
        from . import errors

        value = getattr(errors, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
