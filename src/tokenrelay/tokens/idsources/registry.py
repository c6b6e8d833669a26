"""The one table of OIDC token sources: ``--id-token-source`` values to their classes.

Adding a source is its class (see ``base.Source``), one row in ``platforms.PLATFORMS``, its page
under docs/platforms/ and its tests; ``config`` (the choices and which settings go with which
source), ``daemon`` (building it), ``auto`` (detecting it) and the doctor (reporting it) all read
this table. ``auto`` comes last, and reads ``platforms`` rather than this table, which holds it.
"""

from __future__ import annotations

from .auto import AutoSource
from .base import Source
from .platforms import PLATFORMS

SOURCES: dict[str, type[Source]] = {**PLATFORMS, AutoSource.name: AutoSource}

# The settings only some sources read, beyond the OIDC token file and variable that SourceInputs
# names: SourceInputs.settings carries them, filled from this list by the daemon and the helpers.
SOURCE_SETTINGS = tuple(
    dict.fromkeys(
        option
        for source in PLATFORMS.values()
        for option in source.options
        if option not in ("id_token_file", "id_token_env")
    )
)
