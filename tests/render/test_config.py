"""--render, --hosts, --render-mode and --render-maven-ids from flags, environment and TOML, and the
one-line errors that say what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenrelay.errors import ConfigError
from tokenrelay.sidecar.settings import parse_args

REQUIRED = ["--auth-url", "https://auth.example", "--api-url", "https://api.example", "--identity", "org/ci"]
KEPT = [*REQUIRED, "--audience", "registry.example"]


def test_renders_from_the_environment_comma_separated() -> None:
    """TOKENRELAY_RENDER holds several FORMAT=PATH, TOKENRELAY_HOSTS the hosts they write."""
    env = {
        "TOKENRELAY_RENDER": "netrc=/h/.netrc, docker-config=/h/.docker/config.json",
        "TOKENRELAY_HOSTS": "registry.example",
    }
    settings = parse_args(KEPT, env)
    assert settings.render == ("netrc=/h/.netrc", "docker-config=/h/.docker/config.json")
    assert settings.hosts == ("registry.example",)


def test_renders_from_toml_tables(tmp_path: Path) -> None:
    """``[[render]]`` tables take format, path and, for a template, source."""
    config = tmp_path / "c.toml"
    config.write_text(
        'hosts = ["registry.example"]\n'
        '[[render]]\nformat = "npmrc"\npath = "/h/.npmrc"\n'
        '[[render]]\nformat = "template"\nsource = "/h/env.tmpl"\npath = "/h/env"\n'
    )
    settings = parse_args([*KEPT, "--config", str(config)], {})
    assert settings.render == ("npmrc=/h/.npmrc", "template:/h/env.tmpl=/h/env")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--render", "netrc=/x"], {}, r"--render \(env TOKENRELAY_RENDER\) writes the hosts of --hosts"),
        (
            ["--render", "yaml=/x", "--hosts", "registry.example"],
            {},
            r"--render \(env TOKENRELAY_RENDER\): 'yaml=/x': unknown format 'yaml'",
        ),
        (
            ["--render", "netrc=/x", "--hosts", "127.0.0.1:1=registry.example,127.0.0.1:2"],
            {},
            "netrc names machines without a port",
        ),
        (
            ["--render", "netrc=/x"],
            {"TOKENRELAY_HOSTS": "https://registry.example/"},
            r"--hosts \(env TOKENRELAY_HOSTS\): .* is not host",
        ),
        (
            ["--render-maven-ids", "registry.example"],
            {},
            r"--render-maven-ids .*'registry.example' is not HOST=ID",
        ),
    ],
)
def test_wrong_render_settings_say_what_to_fix(argv: list[str], env: dict[str, str], message: str) -> None:
    """Each mistake is one ConfigError naming the flag and the variable to fix."""
    with pytest.raises(ConfigError, match=message):
        parse_args([*KEPT, "--audience", "127.0.0.1:2", *argv], env)


def test_rendered_hosts_audiences_are_kept_fresh() -> None:
    """A render needs its hosts' tokens: their audiences join the API's and --audience's."""
    argv = [*KEPT, "--hosts", "a.example,b.example=registry.example", "--render", "netrc=/x"]
    assert parse_args(argv, {}).audiences == ("https://api.example", "registry.example", "a.example")


def test_hosts_without_renders_change_nothing() -> None:
    """The helpers' TOKENRELAY_HOSTS in the sidecar's environment, even malformed, neither fails the
    sidecar nor adds audiences while nothing is rendered."""
    for hosts in ("elsewhere.example", "https://not/a/host"):
        assert parse_args(REQUIRED, {"TOKENRELAY_HOSTS": hosts}).audiences == ("https://api.example",)
