"""What a program embedding tokenrelay catches: the package names its errors, subclasses included."""

from __future__ import annotations

import tokenrelay
from tokenrelay import errors


def test_a_named_error_s_subclasses_are_named_too() -> None:
    """Beside ``tokenrelay.IdTokenError`` and ``tokenrelay.ExchangeError``, their finer kinds (an
    expired token, an exchange that timed out) are reachable from the package itself."""
    named = {getattr(tokenrelay, name) for name in tokenrelay.__all__ if name != "__version__"}
    bases = named - {errors.TokenRelayError}  # every error is one of those: only the named families
    finer = {
        value.__name__
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, tuple(bases))
    }
    assert {"IdTokenExpired", "ExchangeTimeout"} <= finer
    assert finer <= set(tokenrelay.__all__)
