"""The config loader fed random flags, environment and TOML: Settings, or a ConfigError naming the setting."""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tokenrelay.errors import ConfigError
from tokenrelay.options import Option
from tokenrelay.sidecar.settings import OPTIONS, OPTIONS_BY_NAME, Settings, parse_args

BASE = [
    "--auth-url=https://auth.example",
    "--api-url=https://api.example",
    "--identity=groups/a/identities/b",
]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

texts = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)
# Strings that look like what each kind expects, so that the fuzzer also gets past the first check.
near_misses = st.sampled_from(
    [
        "0",
        "1",
        "-1",
        "0600",
        "0777",
        "0o600",
        "1e9",
        "nan",
        "inf",
        "-0",
        "1,2",
        "1,,x",
        "true",
        "yes",
        "off",
        "127.0.0.1:8080",
        "[::1]:0",
        ":80",
        "localhost:99999",
        "http://x",
        "https://x/?q",
        "ftp://x",
        "²",
        "\uff11\uff12",  # fullwidth digits: isdigit() but not int()-able everywhere
    ]
)
flag_values = st.one_of(texts, near_misses)
toml_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    near_misses,
)
toml_values = st.one_of(
    toml_scalars, st.lists(toml_scalars, max_size=4), st.dictionaries(texts, toml_scalars, max_size=2)
)


def toml(value: Any) -> str:
    """A TOML rendering of ``value`` (tomllib only reads)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"


def check(error: ConfigError, option: Option) -> None:
    message = str(error)
    assert re.search(r"--[a-z]", message), message
    assert "TOKENRELAY_" in message, message
    if "(from " in message:  # a conversion error: it names this very setting
        assert option.flag in message, message
        assert option.env in message, message


@FUZZ
@given(option=st.sampled_from([o for o in OPTIONS if o.kind != "bool"]), value=flag_values)
def test_flag_values(option: Option, value: str) -> None:
    """Any value of any flag: Settings, or a ConfigError naming the flag and its variable."""
    try:
        result = parse_args([*BASE, f"{option.flag}={value}"], environ={})
    except ConfigError as exc:
        check(exc, option)
    else:
        assert isinstance(result, Settings)


@FUZZ
@given(option=st.sampled_from(OPTIONS), value=flag_values)
def test_environment_values(option: Option, value: str) -> None:
    """Any value of any TOKENRELAY_ variable: Settings, or a ConfigError naming the flag and the variable."""
    try:
        result = parse_args(BASE, environ={option.env: value})
    except ConfigError as exc:
        check(exc, option)
    else:
        assert isinstance(result, Settings)


@FUZZ
@given(option=st.sampled_from(OPTIONS), value=toml_values, dashed=st.booleans())
@example(option=OPTIONS_BY_NAME["proxy_max_connections"], value=math.inf, dashed=False)  # was OverflowError
def test_toml_values(option: Option, value: Any, dashed: bool) -> None:
    """Any TOML value for any key of the --config file: Settings, or a ConfigError naming the setting."""
    key = option.name.replace("_", "-") if dashed else option.name
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "tokenrelay.toml"
        path.write_text(f"{key} = {toml(value)}\n")
        try:
            result = parse_args([*BASE, f"--config={path}"], environ={})
        except ConfigError as exc:
            check(exc, option)
        else:
            assert isinstance(result, Settings)


@FUZZ
@given(raw=st.binary(max_size=200))
@example(raw=b"\x80")  # was UnicodeDecodeError
def test_config_file_bytes(raw: bytes) -> None:
    """Any bytes as the --config file (broken TOML, invalid UTF-8): a ConfigError naming --config."""
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "tokenrelay.toml"
        path.write_bytes(raw)
        try:
            parse_args([*BASE, f"--config={path}"], environ={})
        except ConfigError as exc:
            message = str(exc)
        else:
            return
        assert "--config" in message
