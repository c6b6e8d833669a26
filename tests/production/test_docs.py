"""docs/operations.md stays true to the code: options, metrics and error messages."""

from __future__ import annotations

import argparse
import re

from prometheus_client import CollectorRegistry

from tokenrelay import docgen
from tokenrelay.lite import names
from tokenrelay.sidecar import settings as config
from tokenrelay.sidecar.metrics import Metrics
from tokenrelay.tokens.provider import DEFAULT_BACKOFF, RETRY_SPREAD

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


def _section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of any level."""
    start = text.index(heading) + len(heading)
    following = re.search(r"^#{1,6} ", text[start:], flags=re.MULTILINE)
    return text[start : start + following.start()] if following else text[start:]


def test_once_section_says_what_oneshot_does() -> None:
    """docs/operations.md's --once section says that transient failures are retried within
    --wait-timeout (as sidecar/oneshot.py does), never "one attempt, with no retries"."""
    section = _section(DOC.read_text(), "## One shot: `--once`")
    assert "no retries" not in section
    assert "`--wait-timeout`" in section
    assert "--wait-timeout" in (SRC / "sidecar" / "oneshot.py").read_text()
    (once,) = [option for option in config.OPTIONS if option.name == "once"]
    assert "--wait-timeout" in once.help


def test_retry_spacing_in_the_docs_matches_the_provider() -> None:
    """Wherever the docs give the 30 s retry cap, they say it holds only without a valid token, and
    that retries spread over half the remaining life while one is held, as the provider does."""
    assert DEFAULT_BACKOFF.cap == 30.0
    assert RETRY_SPREAD == 0.5
    for doc in (DOC, REPO / "docs" / "troubleshooting.md"):
        text = " ".join(doc.read_text().split())
        assert "at most 30 s apart" in text, doc
        for match in re.finditer(r"at most 30 s apart", text):
            around = text[max(0, match.start() - 300) : match.end() + 300]
            assert "no valid token" in around and "half" in around, (doc, around)


def test_dev_samples_show_every_kind_of_line_dev_prints() -> None:
    """The README's and docs/emulator.md's sample output of `tokenrelay dev` show every kind of line
    dev.py prints, in its order (runs of `try:` lines may be cut short with `...`)."""
    printed = re.findall(
        r"^\s+\(\s*\"(\w+)\",", (SRC / "emulator" / "dev.py").read_text(), flags=re.MULTILINE
    )

    def kinds(names: list[str]) -> list[str]:
        return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]

    assert kinds(printed)[:2] == ["emulator", "api_url"] and printed[-1] == "ready"
    for page in (REPO / "README.md", REPO / "docs" / "emulator.md"):
        block = re.search(r"```\n(emulator: .*?)```", page.read_text(), flags=re.DOTALL)
        assert block is not None, page
        shown = [line.split(":", 1)[0] for line in block.group(1).splitlines() if line not in ("...", "…")]
        assert kinds(shown) == kinds(printed), page


EXEC_DOC = REPO / "docs" / "exec.md"


def test_exec_reference_is_up_to_date() -> None:
    """docs/exec.md's generated tables are exactly what exec's option table and --configure targets give."""
    assert docgen.main(["--check", str(EXEC_DOC)]) == 0, (
        "run: python -m tokenrelay.docgen --write docs/exec.md"
    )


def test_every_exec_flag_is_documented() -> None:
    """Every flag `tokenrelay exec` accepts is in operations.md's reference (run's) or exec.md's (its own)."""
    from tokenrelay.exec import cli as exec_cli
    from tokenrelay.exec.targets import TARGETS

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
