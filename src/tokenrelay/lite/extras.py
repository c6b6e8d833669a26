"""Whether an extra of tokenrelay's is installed, and the one command that installs it.

Standard library only, and nothing imported until asked: ``config`` reads the table of OIDC sources,
whose ``missing`` asks here.
"""

from __future__ import annotations


def install(extra: str) -> str:
    """The command a user runs for ``extra``: ``pip install 'tokenrelay[EXTRA]'``."""
    return f"pip install 'tokenrelay[{extra}]'"


def missing(module: str, extra: str) -> str | None:
    """``install(extra)`` when ``module``, which ``extra`` brings, cannot be imported here; else None."""
    import importlib.util

    return install(extra) if importlib.util.find_spec(module) is None else None
