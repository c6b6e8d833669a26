"""Settings from flags, environment and TOML, and the errors that say what to fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tokenrelay.errors import ConfigError
from tokenrelay.lite import names
from tokenrelay.sidecar.settings import OPTIONS, Settings, parse_args
from tokenrelay.tokens.idsources import SOURCES

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


# A value for each option, as a user would write it in the environment, and what Settings holds then.
SAMPLES: dict[str, tuple[str, object]] = {
    "auth_url": ("https://auth.other/", "https://auth.other"),
    "api_url": ("https://api.other", "https://api.other"),
    "identity": ("org/other", "org/other"),
    "audience": ("a,b", ("a", "b")),
    "exchange_timeout": ("3", 3.0),
    "wait_timeout": ("4", 4.0),
    "id_token_source": ("github-actions", "github-actions"),
    "id_token_file": ("/t/oidc", "/t/oidc"),
    "id_token_env": ("MY_OIDC", "MY_OIDC"),
    "id_token_audience": ("aud-x", "aud-x"),
    "azure_service_connection_id": ("0b1c-conn", "0b1c-conn"),
    "socket": ("/t/s.sock", "/t/s.sock"),
    "socket_mode": ("0660", 0o660),
    "socket_allow_uid": ("1,2", (1, 2)),
    "socket_allow_gid": ("3", (3,)),
    "shutdown_grace": ("5", 5.0),
    "proxy_listen": ("127.0.0.1:9", ("127.0.0.1", 9)),
    "proxy_allow_remote": ("true", True),
    "upstream_ca": ("/t/ca.pem", "/t/ca.pem"),
    "proxy_timeout": ("7", 7.0),
    "proxy_max_connections": ("8", 8),
    "metrics_listen": ("127.0.0.1:10", ("127.0.0.1", 10)),
    "token_file": ("/t/token", ("/t/token",)),
    "token_file_mode": ("0640", 0o640),
    "hosts": ("h.example,g.example=aud", ("h.example", "g.example=aud")),
    "render": ("netrc=/t/netrc,npmrc=/t/npmrc", ("netrc=/t/netrc", "npmrc=/t/npmrc")),
    "render_mode": ("0640", 0o640),
    "render_maven_ids": ("h.example=central", ("h.example=central",)),
    "once": ("1", True),
    "log_format": ("text", "text"),
    "log_level": ("debug", "debug"),
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_option_is_read_from_its_environment_variable(name: str) -> None:
    """Each option reaches Settings from TOKENRELAY_<NAME> alone, under the name --help shows."""
    raw, expected = SAMPLES[name]
    env = {"TOKENRELAY_" + name.upper(): raw}
    readers = [source.name for source in SOURCES.values() if name in source.options]
    if readers and name != "id_token_file":  # a source's own setting goes with that source
        env["TOKENRELAY_ID_TOKEN_SOURCE"] = readers[0]
    if name == "render":  # it writes the hosts' tokens: hosts whose audiences are kept
        env.update({"TOKENRELAY_HOSTS": "h.example", "TOKENRELAY_AUDIENCE": "h.example"})
    argv = [arg for i, arg in enumerate(REQUIRED) if REQUIRED[i - (i % 2)][2:].replace("-", "_") != name]
    assert getattr(parse_args(argv, env), name) == expected


def test_the_option_table_and_settings_cannot_disagree() -> None:
    """OPTIONS, Settings and the names module list the same options in the same order, and every
    default --help and the docs show is the default in effect."""
    fields = [f for f in Settings.__dataclass_fields__ if f != "config"]
    assert [option.name for option in OPTIONS] == fields == list(names.OPTION_NAMES) == list(SAMPLES)
    derived = {"id_token_source": "file"}  # chosen by load(): "env" when only --id-token-env is set
    for option in OPTIONS:
        default = Settings.__dataclass_fields__[option.name].default
        if option.required:
            assert default is dataclasses.MISSING, option.name
        else:
            assert default == derived.get(option.name, option.default), option.name
        assert option.where() == names.where(option.name) == f"{option.flag} (env {option.env})"


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


def test_a_bad_choice_is_quoted_as_the_user_wrote_it() -> None:
    """--log-level LOUD is refused quoting 'LOUD', as written, not a lowered copy the user never typed."""
    expected = r"^--log-level \(env TOKENRELAY_LOG_LEVEL\): 'LOUD' is not one of debug"
    with pytest.raises(ConfigError, match=expected):
        parse_args([*REQUIRED, "--log-level", "LOUD"], {})
