"""The flags and variables of `tokenrelay inject` and `tokenrelay webhook`: a contract, spelled out here."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest

from tokenrelay import options
from tokenrelay.emulator import dev
from tokenrelay.errors import ConfigError
from tokenrelay.kube import inject, mutation, settings, webhook
from tokenrelay.sidecar import settings as config

# flag -> (environment variable, default): as they were released, which manifests and scripts use
INJECTOR: dict[str, tuple[str | None, Any]] = {
    "--auth-url": ("TOKENRELAY_AUTH_URL", None),
    "--api-url": ("TOKENRELAY_API_URL", None),
    "--image": ("TOKENRELAY_IMAGE", settings.DEFAULT_IMAGE),
    "--oidc-audience": ("TOKENRELAY_OIDC_AUDIENCE", None),
    "--kube-version": ("TOKENRELAY_KUBE_VERSION", None),
}
INJECT = {"-f": (None, "-"), "--filename": (None, "-"), "--identity": (None, None), **INJECTOR}
WEBHOOK = {
    "--listen": (None, "0.0.0.0:8443"),
    "--metrics-listen": (None, "0.0.0.0:9090"),
    "--tls-dir": (None, "/var/run/tokenrelay-webhook/tls"),
    "--cert-secret": (None, None),
    "--webhook-configuration": (None, "tokenrelay-injector"),
    "--service": (None, "tokenrelay-injector"),
    "--namespace": ("POD_NAMESPACE", None),
    "--exclude-namespace": (None, []),
    "--check-interval": (None, 60.0),
    "--shutdown-delay": (None, 5.0),
    "--log-level": (None, "info"),
    "--log-format": (None, "json"),
    **INJECTOR,
}
URLS = {"TOKENRELAY_AUTH_URL": "https://auth.example.com", "TOKENRELAY_API_URL": "https://api.example.com"}


def spelled(add_arguments: Callable[[argparse.ArgumentParser], None]) -> dict[str, tuple[str | None, Any]]:
    """flag -> (variable, default) as the command's parser and option table give them."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = {o.name: o for o in (*settings.OPTIONS, *inject.OPTIONS, *webhook.OPTIONS)}
    found = {}
    for action in parser._actions:
        if action.dest == "help":
            continue
        option = options[action.dest]
        variable = option.env if option.variable is not None else None
        for flag in action.option_strings:
            found[flag] = (variable, option.default if action.default is None else action.default)
    return found


@pytest.mark.parametrize(
    ("add_arguments", "expected"), [(inject.add_arguments, INJECT), (webhook.add_arguments, WEBHOOK)]
)
def test_flags_variables_and_defaults_are_as_released(
    add_arguments: Callable[[argparse.ArgumentParser], None], expected: dict[str, tuple[str | None, Any]]
) -> None:
    """Every flag of inject and webhook keeps its name, its variable (or none) and its default."""
    assert spelled(add_arguments) == expected


def test_every_injector_setting_is_read_from_its_variable() -> None:
    """With no flag at all, each injector setting comes from its TOKENRELAY_ variable."""
    env = {
        **URLS,
        "TOKENRELAY_IMAGE": "mirror.example.com/tokenrelay:1",
        "TOKENRELAY_OIDC_AUDIENCE": "sts.example.com",
        "TOKENRELAY_KUBE_VERSION": "v1.30.2",
    }
    parser = argparse.ArgumentParser()
    inject.add_arguments(parser)
    assert settings.injector(parser.parse_args([]), env) == mutation.Injector(
        auth_url="https://auth.example.com",
        api_url="https://api.example.com",
        image="mirror.example.com/tokenrelay:1",
        oidc_audience="sts.example.com",
        kube_version=(1, 30),
    )


def test_the_webhook_defaults_are_its_settings_defaults() -> None:
    """A webhook given only its URLs and namespace runs with WebhookSettings' defaults."""
    parser = argparse.ArgumentParser()
    webhook.add_arguments(parser)
    got = webhook.webhook_settings(parser.parse_args([]), {**URLS, "POD_NAMESPACE": "tokenrelay-system"})
    assert got == webhook.WebhookSettings(
        injector=settings.injector(parser.parse_args([]), URLS),
        excluded=frozenset({"kube-system", "tokenrelay-system"}),
    )


def test_bad_seconds_name_the_flag() -> None:
    """A --check-interval that is not a number of seconds is refused, naming the flag."""
    parser = argparse.ArgumentParser()
    webhook.add_arguments(parser)
    args = parser.parse_args(["--check-interval", "soon"])
    with pytest.raises(ConfigError, match=r"^--check-interval: 'soon' is not a number of seconds"):
        webhook.webhook_settings(args, {**URLS, "POD_NAMESPACE": "x"})


def test_a_bad_url_names_the_variable_it_came_from() -> None:
    """An injector URL from the environment that is not http(s) is refused naming that variable, as
    run's own settings are (one reader for every command)."""
    parser = argparse.ArgumentParser()
    inject.add_arguments(parser)
    env = {**URLS, "TOKENRELAY_API_URL": "api.example.com"}
    with pytest.raises(ConfigError, match=r"'api.example.com' is not .* URL \(from TOKENRELAY_API_URL\)$"):
        settings.injector(parser.parse_args([]), env)


def test_a_webhook_seconds_flag_takes_zero_and_refuses_a_day() -> None:
    """--shutdown-delay 0 stops at once; a day or more is refused naming the flag."""
    parser = argparse.ArgumentParser()
    webhook.add_arguments(parser)
    env = {**URLS, "POD_NAMESPACE": "x"}
    assert webhook.webhook_settings(parser.parse_args(["--shutdown-delay", "0"]), env).shutdown_delay == 0
    with pytest.raises(ConfigError, match=r"^--shutdown-delay: '86400' is not a number of seconds"):
        webhook.webhook_settings(parser.parse_args(["--shutdown-delay", "86400"]), env)


def test_an_empty_metrics_listen_turns_the_webhooks_metrics_off() -> None:
    """--metrics-listen "" serves no metrics port; unset, the default 0.0.0.0:9090 is served."""
    parser = argparse.ArgumentParser()
    webhook.add_arguments(parser)
    env = {**URLS, "POD_NAMESPACE": "x"}
    assert webhook.webhook_settings(parser.parse_args(["--metrics-listen", ""]), env).metrics_listen is None
    assert webhook.webhook_settings(parser.parse_args([]), env).metrics_listen == ("0.0.0.0", 9090)


def test_log_level_is_one_definition_for_every_command() -> None:
    """run, webhook and dev accept the same --log-level choices with the same default."""
    choices = set()
    for add_arguments in (config.add_arguments, webhook.add_arguments, dev.add_arguments):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        (action,) = [a for a in parser._actions if "--log-level" in a.option_strings]
        choices.add(tuple(action.choices or options.LOG_LEVELS))
        assert action.default in (None, "info")
    assert choices == {options.LOG_LEVELS}
