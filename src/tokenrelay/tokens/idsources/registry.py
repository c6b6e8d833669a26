"""The one table of OIDC token sources: ``--id-token-source`` values to their classes.

Adding a source is its class (see ``base.Source``), one row in ``platforms.PLATFORMS``, its page
under docs/platforms/ and its tests; ``tokenrelay run``'s settings (``options_rows``: the choices and
the settings the sources read, and ``check_settings``: which settings go with which source),
``daemon`` (building it), ``auto`` (detecting it) and the doctor (reporting it) all read this table.
A setting a source reads is a row of ``_OPTIONS``, named in the class's ``options`` (and
``required``). ``auto`` comes last, and reads ``platforms`` rather than this table, which holds it.
"""

from __future__ import annotations

from ...errors import ConfigError
from ...lite.names import DEFAULT_ID_TOKEN_FILE, where
from ...options import Option
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


# The settings of the family, which its members name in their ``options`` and ``required`` (several
# sources read the same one): rows of ``tokenrelay run``'s table, after --id-token-source itself.
_OPTIONS: tuple[Option, ...] = (
    Option(
        "id_token_file",
        "File holding the platform's OIDC token; re-read at every exchange.",
        kind="path",
        default=DEFAULT_ID_TOKEN_FILE,
        metavar="PATH",
    ),
    Option("id_token_env", "Environment variable holding the platform's OIDC token.", metavar="VAR"),
    Option(
        "id_token_audience",
        "Audience to request of a source that mints the OIDC token at every exchange (GitHub Actions, "
        "Buildkite, CircleCI's CLI, GCP, Azure, AWS, SPIFFE; default: the --auth-url).",
        metavar="AUD",
    ),
    Option(
        "azure_service_connection_id",
        "Azure Pipelines service connection to request the OIDC token for "
        "(default: AZURESUBSCRIPTION_SERVICE_CONNECTION_ID).",
        metavar="ID",
    ),
)


def options_rows() -> tuple[Option, ...]:
    """The family's rows for ``tokenrelay run``'s table: --id-token-source, whose choices are the
    table's names as they stand now, then the settings the sources read."""
    choice = Option(
        "id_token_source",
        "Where the platform's OIDC token comes from (docs/platforms/); auto detects it.",
        kind="choice",
        choices=tuple(SOURCES),
        metavar="SOURCE",
    )
    return (choice, *_OPTIONS)


def check_settings(settings: object) -> None:
    """The settings the chosen source needs are given, and none that only another source reads."""
    rows = {row.name: row for row in _OPTIONS}
    name = getattr(settings, "id_token_source")  # noqa: B009 - any command's settings, by option name
    source = SOURCES[name]
    for option in source.required:
        if getattr(settings, option) is None:
            raise ConfigError(f"--id-token-source {name} needs {where(option)}: {rows[option].help}")
    for option in sorted({option for other in SOURCES.values() for option in other.options}):
        given = getattr(settings, option) is not None and rows[option].default is None
        if given and option not in source.options:
            raise ConfigError(f"{where(option)} does not go with --id-token-source {name}; set one of them")
