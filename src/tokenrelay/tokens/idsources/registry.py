"""The one table of OIDC token sources: ``--id-token-source`` values to their classes.

Adding a source is its class (see ``base.Source``), one row here, its page under docs/platforms/ and
its tests; ``config`` (the choices and which settings go with which source), ``daemon`` (building
it), ``auto`` (detecting it) and the doctor (reporting it) all read this table.
"""

from __future__ import annotations

from .base import Source
from .github import GitHubActionsSource
from .local import EnvSource, FileSource

SOURCES: dict[str, type[Source]] = {
    source.name: source
    for source in (
        FileSource,
        EnvSource,
        GitHubActionsSource,
    )
}
