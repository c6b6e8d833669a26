"""Each family's seam: a member registered in its table alone gets its flag, variable, docs row and check."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from tokenrelay import docgen
from tokenrelay.errors import ConfigError
from tokenrelay.helpers.hosts import Host
from tokenrelay.options import Option, add_options, read
from tokenrelay.proxy import limits
from tokenrelay.render import FORMATS, Entry, Format, Options, parse
from tokenrelay.render import options as format_values
from tokenrelay.sidecar import settings
from tokenrelay.tokens.idsources import SOURCES, Source
from tokenrelay.tokens.idsources.base import SourceInputs

REQUIRED = ["--auth-url", "https://auth.example", "--api-url", "https://api.example", "--identity", "g/i"]
BASE = {
    "TOKENRELAY_AUTH_URL": "https://auth.example",
    "TOKENRELAY_API_URL": "https://api.example",
    "TOKENRELAY_IDENTITY": "g/i",
}


def _parser(rows: Sequence[Option]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_options(parser, rows)
    return parser


class Ini(Format):
    """A test-only format with one option of its own."""

    name = "ini"
    options = (Option("render_ini_indent", "Spaces before an ini key.", kind="int", default=1, metavar="N"),)

    def __init__(self, indent: int) -> None:
        self.indent = indent

    @classmethod
    def build(cls, source: str | None, options: Options) -> Format:
        return cls(options["render_ini_indent"])

    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        return "".join(f"{' ' * self.indent}{entry.key} = {entry.token}\n" for entry in entries)

    def tokens(self, text: str) -> dict[str, str]:
        return {}


def test_a_format_registered_alone_gets_its_flag_variable_docs_row_and_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A format's own option, declared on its class, is a flag and a variable of run, a row of the
    configuration reference, checked by its kind, and reaches the format's build by name."""
    monkeypatch.setitem(FORMATS, "ini", Ini)
    rows = settings.table()
    args = _parser(rows).parse_args([])
    assert read(rows, args, {**BASE, "TOKENRELAY_RENDER_INI_INDENT": "4"})["render_ini_indent"] == 4
    assert read(rows, _parser(rows).parse_args(["--render-ini-indent", "2"]), BASE)["render_ini_indent"] == 2
    with pytest.raises(ConfigError, match=r"^--render-ini-indent \(env TOKENRELAY_RENDER_INI_INDENT\): "):
        read(rows, args, {**BASE, "TOKENRELAY_RENDER_INI_INDENT": "many"})
    assert "| `--render-ini-indent N` | `TOKENRELAY_RENDER_INI_INDENT` | `render_ini_indent` |" in (
        docgen.reference()
    )
    built = parse("ini=/tmp/x.ini", format_values(argparse.Namespace(render_ini_indent=4))).format
    assert isinstance(built, Ini) and built.indent == 4
    assert built.render(None, [], [Entry("h", Host("h", None, "h"), "t", "")]) == "    h = t\n"


@dataclass(frozen=True, slots=True)
class TestLimits(limits.Limits):
    """Run's limits with one more that a user sets."""

    __test__: ClassVar[bool] = False  # not a test class, whatever its name
    upstream_retries: int = field(
        default=2,
        metadata={limits.OPTION: Option("proxy_retries", "Upstream retries.", kind="int", default=2)},
    )


def test_a_limit_declared_alone_gets_its_flag_variable_docs_row_and_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Limits field that declares an option is a flag and a variable of run and a docs row, and
    ``Limits.from_settings`` fills it from that option's value."""
    monkeypatch.setattr(limits, "Limits", TestLimits)
    rows = settings.table()
    values = read(
        rows, _parser(rows).parse_args(["--proxy-retries", "5"]), {**BASE, "TOKENRELAY_PROXY_TIMEOUT": "7"}
    )
    assert (values["proxy_retries"], values["proxy_timeout"]) == (5, 7.0)
    assert "| `--proxy-retries` | `TOKENRELAY_PROXY_RETRIES` | `proxy_retries` |" in docgen.reference()
    with pytest.raises(ConfigError, match=r"^--proxy-retries \(env TOKENRELAY_PROXY_RETRIES\): "):
        read(rows, _parser(rows).parse_args([]), {**BASE, "TOKENRELAY_PROXY_RETRIES": "0"})
    built = TestLimits.from_settings(
        argparse.Namespace(proxy_retries=5, proxy_timeout=7.0, proxy_max_connections=9)
    )
    assert (built.upstream_retries, built.upstream_timeout, built.max_connections) == (5, 7.0, 9)


class Probe(Source):
    """A test-only source that needs the audience."""

    name = "probe"
    platform = "a test"
    options: ClassVar[tuple[str, ...]] = ("id_token_audience",)
    required: ClassVar[tuple[str, ...]] = ("id_token_audience",)

    @classmethod
    def build(cls, inputs: SourceInputs) -> Source:
        raise NotImplementedError


def test_a_source_registered_alone_gets_its_choice_docs_and_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source in SOURCES alone is a choice of --id-token-source, named in the reference, and run
    refuses it without the settings it requires, naming them."""
    monkeypatch.setitem(SOURCES, "probe", Probe)
    assert "`probe`" in docgen.reference()
    with pytest.raises(ConfigError, match=r"--id-token-source probe needs --id-token-audience"):
        settings.parse_args([*REQUIRED, "--id-token-source", "probe"], {})
    chosen = settings.parse_args([*REQUIRED, "--id-token-source", "probe", "--id-token-audience", "a"], {})
    assert chosen.id_token_source == "probe"


def test_the_declared_rows_are_runs() -> None:
    """The rows the families declare are the very rows of run's table (one declaration each)."""
    by_name: dict[str, Any] = settings.OPTIONS_BY_NAME
    assert all(by_name[row.name] is row for row in (*limits.options(), *FORMATS["maven"].options))


def test_every_source_names_only_its_familys_rows() -> None:
    """The settings each source reads are rows its family declares, so its check can name them."""
    from tokenrelay.tokens.idsources.registry import options_rows

    declared = {row.name for row in options_rows()}
    assert all(set(source.required) <= set(source.options) <= declared for source in SOURCES.values())
