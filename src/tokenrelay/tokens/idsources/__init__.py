"""Where the platform's OIDC token comes from: one class per source behind one interface.

``base.Source`` is the interface, ``registry.SOURCES`` the one table of them. Every source reads or
mints afresh at every exchange (a cached copy goes stale). A token that is missing, empty or (when it
is a JWT) already expired is refused before any request carries it, by ``lite.oidccheck``'s checks,
which the credential helpers share. Standard library only at import: aiohttp loads when a source
first asks an endpoint.
"""

from __future__ import annotations

from .base import IdToken, IdTokenSource, Source, SourceInputs, checked, explained, unsaid
from .github import MAX_GITHUB_ANSWER_BYTES, GitHubActionsSource
from .local import FILE_SETTING, FileSource
from .registry import SOURCE_SETTINGS, SOURCES
from .variables import EnvSource

__all__ = [
    "FILE_SETTING",
    "MAX_GITHUB_ANSWER_BYTES",
    "SOURCES",
    "SOURCE_SETTINGS",
    "EnvSource",
    "FileSource",
    "GitHubActionsSource",
    "IdToken",
    "IdTokenSource",
    "Source",
    "SourceInputs",
    "checked",
    "explained",
    "unsaid",
]
