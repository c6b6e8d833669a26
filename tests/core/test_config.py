"""Settings from flags, environment and TOML, and the errors that say what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenrelay.config import OPTIONS, Settings, parse_args
from tokenrelay.errors import ConfigError

REQUIRED = ["--auth-url", "https://auth.example", "--api-url", "https://api.example", "--identity", "org/ci"]


def test_defaults_match_the_documented_interface() -> None:
    """Defaults a user relies on: socket path and mode, token file, json logs at info."""
    settings = parse_args(REQUIRED, {})
    assert settings.socket == "/var/run/tokenrelay/tokenrelay.sock"
    assert settings.socket_mode == 0o600
    assert settings.id_token_file == "/var/run/secrets/tokens/oidc-token"
    assert settings.id_token_source == "file"
    assert (settings.log_format, settings.log_level) == ("json", "info")


def test_precedence_is_flag_then_env_then_file_then_default(tmp_path: Path) -> None:
    """A flag beats the environment, which beats the TOML file, which beats the default."""
    config = tmp_path / "tokenrelay.toml"
    config.write_text(
        'log_level = "warning"\nsocket = "/from/file.sock"\n'
        'exchange-timeout = 3\nidentity = "org/from-file"\n'
    )
    env = {"TOKENRELAY_SOCKET": "/from/env.sock", "TOKENRELAY_IDENTITY": "org/from-env"}
    settings = parse_args([*REQUIRED[:4], "--config", str(config), "--identity", "org/flag"], env)
    assert settings.identity == "org/flag"
    assert settings.socket == "/from/env.sock"
    assert settings.log_level == "warning"
    assert settings.exchange_timeout == 3.0


def test_every_option_has_its_environment_variable() -> None:
    """Each flag --x-y is settable as TOKENRELAY_X_Y."""
    for option in OPTIONS:
        assert option.env == "TOKENRELAY_" + option.flag[2:].replace("-", "_").upper()


def test_audiences_start_with_the_api_and_are_unique() -> None:
    """The API is always the first audience; repeats and comma lists collapse."""
    env = {"TOKENRELAY_AUDIENCE": "registry.example, https://api.example"}
    assert parse_args(REQUIRED, env).audiences == ("https://api.example", "registry.example")
    flags = [*REQUIRED, "--audience", "b", "--audience", "a", "--audience", "b"]
    assert parse_args(flags, {}).audiences == ("https://api.example", "b", "a")


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, r"--auth-url \(env TOKENRELAY_AUTH_URL\) is required"),
        (REQUIRED[:4], {}, r"--identity \(env TOKENRELAY_IDENTITY\) is required"),
        ([*REQUIRED[2:], "--auth-url", "auth.example"], {}, "not an http:// or https:// URL"),
        (REQUIRED, {"TOKENRELAY_SOCKET_MODE": "rw"}, r"--socket-mode .*not an octal mode"),
        (REQUIRED, {"TOKENRELAY_SOCKET_MODE": "0755"}, "execute bits"),
        (REQUIRED, {"TOKENRELAY_LOG_FORMAT": "xml"}, "not one of json, text"),
        (REQUIRED, {"TOKENRELAY_EXCHANGE_TIMEOUT": "-1"}, "more than 0"),
        (REQUIRED, {"TOKENRELAY_PROXY_LISTEN": "0.0.0.0:8080"}, "--proxy-allow-remote"),
        (REQUIRED, {"TOKENRELAY_PROXY_LISTEN": "8080"}, "not HOST:PORT"),
        (REQUIRED, {"TOKENRELAY_ID_TOKEN_SOURCE": "env"}, "needs --id-token-env"),
        ([*REQUIRED, "--token-file", "/t=other"], {}, "add it with --audience"),
    ],
)
def test_bad_settings_name_the_flag_and_variable(argv: list[str], env: dict[str, str], expected: str) -> None:
    """Each mistake gets one message naming what to fix."""
    with pytest.raises(ConfigError, match=expected):
        parse_args(argv, env)


def test_env_origin_is_named_in_the_error() -> None:
    """When the bad value came from the environment, the message says so."""
    with pytest.raises(ConfigError, match=r"from TOKENRELAY_SHUTDOWN_GRACE"):
        parse_args(REQUIRED, {"TOKENRELAY_SHUTDOWN_GRACE": "soon"})


def test_unknown_toml_key_lists_the_known_ones(tmp_path: Path) -> None:
    """A typo in the TOML file is caught, with the keys that do exist."""
    config = tmp_path / "c.toml"
    config.write_text('auth_ur = "https://x"\n')
    with pytest.raises(ConfigError, match="unknown key 'auth_ur'.*auth_url"):
        parse_args(["--config", str(config)], {})


def test_broken_toml_is_reported(tmp_path: Path) -> None:
    """A TOML syntax error names the file."""
    config = tmp_path / "c.toml"
    config.write_text("auth_url = \n")
    with pytest.raises(ConfigError, match=f"cannot read {config}"):
        parse_args(["--config", str(config)], {})


def test_helper_keys_in_a_shared_file_are_accepted(tmp_path: Path) -> None:
    """The credential helpers' `hosts` key may share the sidecar's TOML file."""
    config = tmp_path / "c.toml"
    config.write_text('hosts = ["registry.example"]\n')
    assert parse_args([*REQUIRED, "--config", str(config)], {}).identity == "org/ci"


def test_id_token_env_alone_selects_the_env_source() -> None:
    """--id-token-env is enough; no need to also say --id-token-source env."""
    settings = parse_args([*REQUIRED, "--id-token-env", "OIDC"], {})
    assert (settings.id_token_source, settings.id_token_env) == ("env", "OIDC")


def test_settings_are_frozen() -> None:
    """Settings cannot be changed after validation."""
    settings = Settings(auth_url="https://a", api_url="https://b", identity="i")
    with pytest.raises(AttributeError):
        settings.identity = "other"  # type: ignore[misc]


@pytest.mark.parametrize("value", ["true", "2.7"])
def test_integer_option_refuses_booleans_and_fractions(tmp_path: Path, value: str) -> None:
    """TOML `true` or `2.7` for a count is a mistake to report, not 1 or 2."""
    config = tmp_path / "c.toml"
    config.write_text(f"proxy_max_connections = {value}\n")
    with pytest.raises(ConfigError, match="--proxy-max-connections.*not a whole number"):
        parse_args([*REQUIRED, "--config", str(config)], {})
