"""docs/operations.md stays true to the code: options, metrics and error messages."""

from __future__ import annotations

import argparse
import re

from prometheus_client import CollectorRegistry

from tokenrelay import config
from tokenrelay.config import docgen
from tokenrelay.lite import names
from tokenrelay.sidecar.metrics import Metrics

from ..support.production import REPO

DOC = REPO / "docs" / "operations.md"
SRC = REPO / "src" / "tokenrelay"


def test_config_reference_is_up_to_date() -> None:
    """The generated configuration reference in the doc is exactly what the option table gives today."""
    assert docgen.main(["--check", str(DOC)]) == 0, (
        "run: python -m tokenrelay.docgen --write docs/operations.md"
    )


def test_every_run_flag_and_variable_is_documented() -> None:
    """Every flag `tokenrelay run` accepts, with its variable and TOML key, has a row in the reference."""
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    flags = {s for action in parser._actions for s in action.option_strings if s.startswith("--")}
    flags.discard("--help")
    text = DOC.read_text()
    section = text[text.index(docgen.BEGIN) : text.index(docgen.END)]
    rows = [line for line in section.splitlines() if line.startswith("| `--")]
    documented = {row.split("`")[1].split()[0] for row in rows}
    assert documented == flags
    for option in config.OPTIONS:
        assert f"`{option.env}` | `{option.name}`" in section


def test_every_metric_is_documented() -> None:
    """Each metric tokenrelay exports has a row in the metrics table."""
    registry = CollectorRegistry()
    Metrics(registry, ["https://api.example.test"])
    text = DOC.read_text()
    names = set()
    for family in registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        names.add(name)
        assert f"| `{name}` |" in text, name
    assert "tokenrelay_proxy_retries_total" in names


def _source_text() -> str:
    """All of tokenrelay's sources, with implicitly concatenated string literals joined."""
    text = "\n".join(path.read_text() for path in sorted(SRC.rglob("*.py")))
    text = re.sub(r"\"\s*\n\s*f?\"", "", text)
    # the constants that messages interpolate
    return (
        re.sub(
            r"\{(where|flag|env)\('(\w+)'\)\}",
            lambda m: str(getattr(names, m.group(1))(m.group(2))),
            text,
        )
        .replace("{ENV_PREFIX}", names.ENV_PREFIX)
        .replace("{_WHERE}", "--socket (env TOKENRELAY_SOCKET)")
        .replace("{example}", "127.0.0.1:8080")  # loopback.parse_hostport's default example
    )


def _message_rows(text: str) -> list[str]:
    """The rows of every table headed ``| Message |``."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("| Message |"):
            inside = True
        elif not line.startswith("|"):
            inside = False
        elif inside and line.startswith("| `"):
            rows.append(line)
    return rows


def test_troubleshooting_messages_exist_in_the_code() -> None:
    """Every message quoted in the troubleshooting tables is still one tokenrelay prints."""
    source = _source_text()
    missing = []
    rows = _message_rows((REPO / "docs" / "troubleshooting.md").read_text())
    assert len(rows) > 40
    for row in rows:
        first_cell = row.split(" | ")[0]
        for quoted in re.findall(r"`([^`]+)`", first_cell):
            for fragment in quoted.split("…"):
                fragment = fragment.strip(" :;,()/")
                if len(fragment) >= 6 and fragment not in source:
                    missing.append(fragment)
    assert missing == []


EXEC_DOC = REPO / "docs" / "exec.md"


def test_exec_reference_is_up_to_date() -> None:
    """docs/exec.md's generated tables are exactly what exec's option table and --configure targets give."""
    assert docgen.main(["--check", str(EXEC_DOC)]) == 0, (
        "run: python -m tokenrelay.docgen --write docs/exec.md"
    )


def test_every_exec_flag_is_documented() -> None:
    """Every flag `tokenrelay exec` accepts is in operations.md's reference (run's) or exec.md's (its own)."""
    from tokenrelay.wrap import cli as exec_cli
    from tokenrelay.wrap.targets import TARGETS

    parser = exec_cli.Parser()
    exec_cli.add_arguments(parser)
    flags = {s for action in parser._actions for s in action.option_strings if s.startswith("--")}
    flags.discard("--help")
    documented = set()
    for doc, begin, end in ((DOC, docgen.BEGIN, docgen.END), (EXEC_DOC, docgen.EXEC_BEGIN, docgen.EXEC_END)):
        text = doc.read_text()
        section = text[text.index(begin) : text.index(end)]
        documented |= {
            row.split("`")[1].split()[0] for row in section.splitlines() if row.startswith("| `--")
        }
    assert documented == flags
    exec_text = EXEC_DOC.read_text()
    for name in TARGETS:
        assert f"| `{name}` |" in exec_text
