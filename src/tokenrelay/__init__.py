"""tokenrelay: exchange a workload's OIDC token for an API token, keep it fresh, serve it locally."""

# Every credential helper run imports this package first, so nothing is imported here: the error
# classes and even the version are loaded on first use (PEP 562), each a module fewer per helper run.
TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the helpers' start-up
if TYPE_CHECKING:
    from ._version import __version__
    from .errors import (
        ConfigError,
        ExchangeError,
        ExchangeTimeout,
        IdTokenError,
        IdTokenExpired,
        TokenRelayError,
        TokenUnavailable,
        UnknownAudience,
    )

__all__ = [
    "ConfigError",
    "ExchangeError",
    "ExchangeTimeout",
    "IdTokenError",
    "IdTokenExpired",
    "TokenRelayError",
    "TokenUnavailable",
    "UnknownAudience",
    "__version__",
]


def __getattr__(name: str) -> object:
    if name == "__version__":
        from ._version import __version__

        globals()[name] = __version__
        return __version__
    if name in __all__:
        from . import errors

        value = getattr(errors, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
