"""The one table of OIDC token sources: ``--id-token-source`` values to their classes.

Adding a source is its class (see ``base.Source``), one row here, its page under docs/platforms/ and
its tests; ``sidecar.settings`` (the choices, and through ``check_settings`` which settings go with
which source), ``daemon`` (building it), ``auto`` (detecting it) and the doctor (reporting it) all
read this table.
``auto`` (auto.py) is registered last, from its own module: it reads the table to choose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...errors import ConfigError
from ...lite.names import where
from .aws import AwsSource
from .azure import AzureSource
from .azurepipelines import AzurePipelinesSource
from .base import Source
from .buildkite import BuildkiteSource
from .circleci import CircleCiSource
from .gcp import GcpSource
from .github import GitHubActionsSource
from .local import FileSource
from .spiffe import SpiffeSource
from .variables import BitbucketSource, EnvSource, GitLabSource

if TYPE_CHECKING:
    from ...options import Option

SOURCES: dict[str, type[Source]] = {
    source.name: source
    for source in (
        FileSource,
        EnvSource,
        GitHubActionsSource,
        GitLabSource,
        BuildkiteSource,
        CircleCiSource,
        BitbucketSource,
        AzurePipelinesSource,
        GcpSource,
        AzureSource,
        AwsSource,
        SpiffeSource,
    )
}

# The settings only some sources read, beyond the OIDC token file and variable that SourceInputs
# names: SourceInputs.settings carries them, filled from this list by the daemon and the helpers.
SOURCE_SETTINGS = tuple(
    dict.fromkeys(
        option
        for source in SOURCES.values()
        for option in source.options
        if option not in ("id_token_file", "id_token_env")
    )
)


def check_settings(settings: object, rows: Mapping[str, Option]) -> None:
    """The settings the chosen source needs are given, and none that only another source reads;
    ``rows`` are the options of the command that read them (``tokenrelay run``'s), by name."""
    name = getattr(settings, "id_token_source")  # noqa: B009 - any command's settings, by option name
    source = SOURCES[name]
    for option in source.required:
        if getattr(settings, option) is None:
            raise ConfigError(f"--id-token-source {name} needs {where(option)}: {rows[option].help}")
    for option in sorted({option for other in SOURCES.values() for option in other.options}):
        given = getattr(settings, option) is not None and rows[option].default is None
        if given and option not in source.options:
            raise ConfigError(f"{where(option)} does not go with --id-token-source {name}; set one of them")


def _register_auto() -> None:
    from .auto import AutoSource  # it reads SOURCES itself

    SOURCES[AutoSource.name] = AutoSource


_register_auto()
