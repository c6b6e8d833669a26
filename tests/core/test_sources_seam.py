"""The one seam of OIDC token sources: one table, read by config, the daemon and the doctor."""

from __future__ import annotations

import pytest

from tokenrelay.errors import ConfigError
from tokenrelay.sidecar.settings import OPTIONS_BY_NAME, parse_args
from tokenrelay.tokens.idsources import SOURCES, Source

REQUIRED = ["--auth-url", "https://auth.example", "--api-url", "https://api.example", "--identity", "g/i"]


def test_config_offers_exactly_the_registered_sources() -> None:
    """--id-token-source's choices are the table's names, so a new row is a new choice."""
    assert tuple(SOURCES) == OPTIONS_BY_NAME["id_token_source"].choices


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_source_is_one_class_behind_the_interface(name: str) -> None:
    """Each row is a Source subclass under its own name whose settings are real options."""
    source = SOURCES[name]
    assert issubclass(source, Source) and source.name == name and source.platform
    assert set(source.required) <= set(source.options) <= set(OPTIONS_BY_NAME)


def test_a_setting_of_another_source_is_refused() -> None:
    """--id-token-env with the file source is refused in one line naming both."""
    with pytest.raises(ConfigError, match="--id-token-env .* does not go with --id-token-source file"):
        parse_args([*REQUIRED, "--id-token-source", "file", "--id-token-env", "X"], {})


def test_a_sources_own_setting_reaches_it_from_the_command_line() -> None:
    """--azure-service-connection-id reaches the Azure Pipelines source through the daemon's one wiring."""
    from tokenrelay.sidecar.daemon import id_token_source

    env = {"SYSTEM_OIDCREQUESTURI": "http://127.0.0.1:9/oidc", "SYSTEM_ACCESSTOKEN": "t"}
    argv = [*REQUIRED, "--id-token-source", "azure-pipelines", "--azure-service-connection-id", "c0ffee"]
    source = id_token_source(parse_args(argv, env), None, env)
    assert source.description.endswith("for service connection c0ffee")
