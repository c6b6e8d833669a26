"""Claims every page makes, checked against the code: identity uids in their one shape, the flags of
the commands the pages show, the metrics and doctor checks they name, their links, and a runbook for
every shipped alert."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from tokenrelay import cli
from tokenrelay.agent.metrics import AgentMetrics
from tokenrelay.kube.webhook import WebhookMetrics
from tokenrelay.sidecar import settings as config
from tokenrelay.sidecar.metrics import Metrics

from ..support.production import REPO

PAGES = sorted([*REPO.glob("*.md"), *(REPO / "docs").rglob("*.md")])
MANIFESTS = sorted(p for p in (REPO / "deploy").rglob("*") if p.suffix in {".yaml", ".toml"})

# An identity's uid is its group's uid, "/", and its own segment; the organization's uid is 40 hex
# digits, every segment below it 16 (the emulator's choice where the upstream says "a path").
UID = re.compile(r"[0-9a-f]{40}(?:/[0-9a-f]{16})+")
PLACEHOLDERS = {"<identity uid>", "UID"}  # the prose's and the flag reference's
# Where a page or a manifest gives an identity: flags, variables, annotations, TOML, the token
# service's query, the doctor's and `tokenrelay dev`'s output.
IDENTITY_VALUE = re.compile(
    r"(?:--identity[ =](?!\()|identity = \"|TOKENRELAY_IDENTITY[=:] ?|tokenrelay\.dev/identity: "
    r"|[?&]identity=|^identity: |(?:identity:|of identity|the identity) (?=<|[0-9a-f]{8}))"
    r"(<[^>]+>|[^\s\"'`,)&]+)",
    flags=re.MULTILINE,
)


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO))


def _identity_values(text: str) -> list[str]:
    found = [m.group(1) for m in IDENTITY_VALUE.finditer(text)]
    # a manifest's env list: the value on the line after the name
    found += re.findall(r"name: TOKENRELAY_IDENTITY[^\n]*\n\s*value: (\S+)", text)
    return found


def test_identity_uids_have_one_shape_everywhere() -> None:
    """Every identity a page or manifest names is a uid of the one documented shape
    (organization/segment..., hex) or the placeholder `<identity uid>`: no `example-org/web`."""
    odd = []
    for path in [*PAGES, *MANIFESTS]:
        for value in _identity_values(path.read_text()):
            if value not in PLACEHOLDERS and not UID.fullmatch(value):
                odd.append(f"{_relative(path)}: {value}")
    assert odd == []
    assert len([v for p in [*PAGES, *MANIFESTS] for v in _identity_values(p.read_text())]) > 20


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of a parser and of its subcommands' parsers."""
    found = set()
    for action in parser._actions:
        found |= {s for s in action.option_strings if s.startswith("-")}
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _flags(sub)
    return found


def _command_flags() -> dict[str, set[str]]:
    """Each `tokenrelay` subcommand's flags, from the parsers the command itself builds."""
    commands: dict[str, set[str]] = {}
    top = cli._parser()
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                commands[name] = _flags(sub)
    for name, (module_name, _) in cli.PLUGINS.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(module_name).add_arguments(parser)
        commands[name] = _flags(parser)
    return commands


# `tokenrelay SUB` where a shell command starts: a line (after a prompt and variable assignments), a
# pipe, `$(`, `&&` or `;`; its words run to the end of that command.
COMMAND = re.compile(
    r"(?:^[ \t]*(?:\$ )?(?:[A-Z_]+=\S+ )*|\| |\$\(|&& |; )"
    r"tokenrelay ([a-z][a-z-]+)((?:[^|;&#>\n`)]|&(?!&))*)",
    flags=re.MULTILINE,
)


def _code_commands(text: str) -> list[tuple[str, str]]:
    """(subcommand, its words) of every `tokenrelay SUB ...` in the page's code blocks, continuation
    lines joined, up to the end of that command (a pipe, redirection, `;`, `&&` or comment)."""
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for match in COMMAND.finditer(joined):
            found.append((match.group(1), match.group(2)))
    return found


def test_commands_in_the_pages_use_flags_the_commands_have() -> None:
    """Every `tokenrelay SUB --flag` a page shows in a code block names a subcommand and flags that
    its parser really has."""
    commands = _command_flags()
    wrong = []
    seen = 0
    for path in PAGES:
        for sub, words in _code_commands(path.read_text()):
            seen += 1
            if sub not in commands:
                wrong.append(f"{_relative(path)}: tokenrelay {sub}")
                continue
            for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", words):
                if flag not in commands[sub] and flag not in {"-", "--"}:
                    wrong.append(f"{_relative(path)}: tokenrelay {sub} {flag}")
    assert wrong == []
    assert seen > 15


def _metric_names() -> set[str]:
    names = set()
    registries = [Metrics(CollectorRegistry(), ["https://api.example.test"]).registry]
    registries.append(WebhookMetrics(CollectorRegistry()).registry)
    registries.append(AgentMetrics(CollectorRegistry()).registry)
    for registry in registries:
        for family in registry.collect():
            names.add(family.name + ("_total" if family.type == "counter" else ""))
            if family.type == "histogram":
                names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "count", "sum")}
    return names


def test_metrics_the_pages_name_exist() -> None:
    """Every `tokenrelay_*` metric a page or the monitoring manifests name is one tokenrelay exports."""
    exported = _metric_names()
    named = set()
    for path in [*PAGES, *MANIFESTS, REPO / "deploy" / "monitoring" / "tokenrelay-dashboard.json"]:
        named |= {(m, _relative(path)) for m in re.findall(r"\btokenrelay_[a-z_]*[a-z]", path.read_text())}
    # `tokenrelay_proxy_http2_...`: the regex stops at the digit
    unknown = sorted(
        (name, where)
        for name, where in named
        if name not in exported and not any(e.startswith(name) for e in exported)
    )
    assert unknown == []
    assert "tokenrelay_build_info" in exported


GROUPS = "config|oidc|service|sidecar|clients|agent"  # the doctor's groups of checks


def _doctor_check_ids() -> set[str]:
    source = "\n".join(p.read_text() for p in (REPO / "src" / "tokenrelay" / "doctor").glob("*.py"))
    ids = set(re.findall(rf"\"((?:{GROUPS})\.[a-z_.]+)(?:\{{[^}}]*\}})?\"", source))
    ids |= {f"{prefix}N" for prefix in re.findall(r"f\"((?:service|sidecar)\.[a-z]+\.)\{number\}\"", source)}
    ids |= {f"{prefix}HOST" for prefix in re.findall(r"f\"(clients\.[a-z]+\.)\{host\.netloc\}\"", source)}
    ids |= {"config.auth_url", "config.api_url"}  # doctor/settings.py: "config." + the flag's name
    return ids


def test_doctor_checks_the_pages_name_exist() -> None:
    """Every doctor check id a page names in backticks (`service.exchange.N`, `oidc.audience`, ...) is
    one the doctor runs."""
    ids = _doctor_check_ids()
    files = re.compile(r"\.(?:toml|json|yaml|yml|py|md|sock)$")
    unknown = []
    for path in (p for p in PAGES if p.name != "emulator.md"):  # there `oidc.issuer` is an API field
        for name in re.findall(rf"`((?:{GROUPS})\.[A-Za-z_.]+)", path.read_text()):
            if files.search(name) or name.endswith(".") or name.rsplit(".", 1)[-1].isupper():
                continue  # a file, a sentence's end, or a Python constant such as `config.OPTIONS`
            if name not in ids and not name.endswith(".*"):
                unknown.append(f"{_relative(path)}: {name}")
    assert unknown == []


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*]|\[([^]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_links_between_the_pages_resolve() -> None:
    """Every relative link of a page names a file that exists and, with `#anchor`, a heading in it."""
    broken = []
    for path in PAGES:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{_relative(path)}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#{1,6} (.+)$", linked.read_text(), flags=re.MULTILINE)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{_relative(path)}: {target}")
    assert broken == []


def test_paths_the_pages_name_exist() -> None:
    """Every repository path a page names in backticks (deploy/..., docs/..., bench/..., src/...,
    tests/...) exists."""
    missing = []
    for path in PAGES:
        for named in re.findall(r"`((?:deploy|docs|bench|src|tests)/[^`\s:]*)", path.read_text()):
            if not (REPO / named).exists():
                missing.append(f"{_relative(path)}: {named}")
    assert missing == []


def test_every_shipped_alert_has_a_runbook_section() -> None:
    """docs/runbooks.md has a section headed by each alert of deploy/'s PrometheusRules (the sidecars',
    the injector's, the node agent's), and each alert's `runbook_url` annotation points at that section."""
    alerts: dict[str, Any] = {}
    for path in (REPO / "deploy").rglob("prometheusrule.yaml"):
        rule = yaml.safe_load(path.read_text())
        alerts |= {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {"TokenRelayTokenExpiringSoon", "TokenRelayAgentExchangesFailing"} <= set(alerts)
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    sections = set(re.findall(r"^### `?(TokenRelay\w+)`?$", runbooks, flags=re.MULTILINE))
    assert sections == set(alerts)
    for name, alert in alerts.items():
        assert alert["annotations"]["runbook_url"].endswith(f"docs/runbooks.md#{_slug(name)}"), name


# Where the shipped runbook links point: this repository's files on its main branch (a placeholder, as
# ghcr.io/example/tokenrelay is for the image; docs/monitoring.md says how to point them elsewhere).
RUNBOOK_BASE = "https://github.com/example/tokenrelay/blob/main/"


def test_every_runbook_url_is_absolute_and_names_a_section_that_exists() -> None:
    """Every alert's `runbook_url` in deploy/ is an absolute https URL (a relative one is no link in
    Alertmanager or Grafana) to a file of this repository and an anchor of a heading in it."""
    urls = [
        rule["annotations"]["runbook_url"]
        for path in (REPO / "deploy").rglob("prometheusrule.yaml")
        for group in yaml.safe_load(path.read_text())["spec"]["groups"]
        for rule in group["rules"]
    ]
    assert len(urls) >= 10
    broken = []
    for url in urls:
        file_part, _, anchor = url.removeprefix(RUNBOOK_BASE).partition("#")
        linked = REPO / file_part
        headings = (
            re.findall(r"^#{1,6} (.+)$", linked.read_text(), flags=re.MULTILINE) if linked.is_file() else []
        )
        if not url.startswith(RUNBOOK_BASE) or not anchor or anchor not in {_slug(h) for h in headings}:
            broken.append(url)
    assert broken == []


def test_getting_started_names_every_file_that_names_the_placeholder_image() -> None:
    """Every file of deploy/ that names the placeholder image (a kustomize base's `images:`, the
    injector's TOKENRELAY_IMAGE) is in getting-started's list of where to put yours: one left out is
    applied as is and its pods end in ImagePullBackOff."""
    naming = {
        str(path.relative_to(REPO))
        for path in (REPO / "deploy").rglob("*.yaml")
        if "ghcr.io/example/tokenrelay" in path.read_text()
    }
    assert "deploy/agent/base/kustomization.yaml" in naming
    page = (REPO / "docs" / "getting-started.md").read_text()
    section = page[page.index("Then name your image") : page.index("## 3.")]
    listed = set(re.findall(r"`(deploy/[^`]+\.yaml)`", section))
    assert naming - listed == set()


# Flags of other programs that the pages name in prose, and the program.
OTHER_PROGRAMS_FLAGS = {
    "--image-credential-provider-bin-dir": "kubelet",
    "--image-credential-provider-config": "kubelet",
    "--service-account-issuer": "kube-apiserver",
    "--service-account-jwks-uri": "kube-apiserver",
    "--service-account-key-file": "kube-apiserver",
    "--service-account-signing-key-file": "kube-apiserver",
    "--api-audiences": "kube-apiserver",
    "--register-with-taints": "kubelet",
    "--build-arg": "docker build",
    "--entrypoint": "docker run",
    "--global": "git config",
    "--local": "git config",
    "--keyring-provider": "pip",
    "--add": "git config",
    "--netrc": "curl",
    "--netrc-file": "curl",
    "--authfile": "skopeo",
}


def test_flags_the_pages_name_exist() -> None:
    """Every `--flag` a page names in prose is a flag of a tokenrelay command, of one of the
    benchmarks in bench/, or of the other program it is listed for here."""
    ours = set().union(*_command_flags().values())
    bench = "\n".join(p.read_text() for p in (REPO / "bench").iterdir() if p.is_file())
    unknown = []
    for path in PAGES:
        prose = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
        for flag in re.findall(r"`(--[a-z][a-z0-9-]*)", prose):
            if flag not in ours and flag not in OTHER_PROGRAMS_FLAGS and f"{flag}" not in bench:
                unknown.append(f"{_relative(path)}: {flag}")
    assert unknown == []


def test_the_index_lists_every_page_and_the_security_model_is_linked() -> None:
    """docs/README.md links every page of docs/, SECURITY.md and CHANGELOG.md; README.md links the
    index, getting started and SECURITY.md, and says which Python it needs."""
    index = (REPO / "docs" / "README.md").read_text()
    for page in (REPO / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name
    assert "](../SECURITY.md)" in index and "](../CHANGELOG.md)" in index
    readme = (REPO / "README.md").read_text()
    for link in ("](docs/README.md)", "](docs/getting-started.md)", "](SECURITY.md)"):
        assert link in readme, link
    required = re.search(r'requires-python = ">=(\d+\.\d+)"', (REPO / "pyproject.toml").read_text())
    assert required is not None
    assert f"Python {required.group(1)} or later" in readme


# "`--wait-timeout` (10 s)", "(`--exchange-timeout`, 10 s)", "`--token-file-mode` (`0600`)"
STATED_DEFAULT = re.compile(r"`(--[a-z-]+)`(?:,| \(`?)\s*(\d+(?:\.\d+)?|0[0-7]{3})`?( s\b)?")


def test_defaults_the_pages_state_are_the_options_defaults() -> None:
    """Where a page gives a `tokenrelay run` option's default next to it (seconds or a mode), it is the
    default of the option table."""
    options = {option.flag: option for option in config.OPTIONS}
    checked, wrong = 0, []
    for path in PAGES:
        for flag, value, seconds in STATED_DEFAULT.findall(" ".join(path.read_text().split())):
            option = options.get(flag)
            if option is None or option.kind not in ("seconds", "mode"):
                continue
            checked += 1
            expected = f"{option.default:04o}" if option.kind == "mode" else f"{option.default:g}"
            stated = value if option.kind == "mode" else f"{float(value):g}"
            if stated != expected or (option.kind == "seconds") != bool(seconds):
                wrong.append(f"{_relative(path)}: {flag} {value}{seconds}")
    assert wrong == []
    assert checked >= 5


def test_annotations_the_pages_name_exist() -> None:
    """Every `tokenrelay.dev/...` name a page or manifest gives is an annotation the injector reads, its
    opt-in label, its status annotation, or the node agent's start-up taint."""
    from tokenrelay.kube import options

    known = {*options.ANNOTATIONS, options.STATUS, options.INJECT_LABEL, options.AGENT_NOT_READY}
    unknown = []
    for path in [*PAGES, *MANIFESTS]:
        for name in re.findall(r"\btokenrelay\.dev/[a-z-]+", path.read_text()):
            if name not in known:
                unknown.append(f"{_relative(path)}: {name}")
    assert unknown == []


def test_the_emulators_platform_token_lifetimes_are_the_ones_it_mints() -> None:
    """docs/emulator.md's lifetimes of the platforms' tokens are the emulator's: the endpoints' (15
    minutes), AWS STS's default DurationSeconds (5 minutes) and `emulate mint`'s default."""
    from tokenrelay.emulator.platforms import aws as awssts
    from tokenrelay.emulator.platforms.base import PLATFORM_LIFETIME

    text = " ".join((REPO / "docs" / "emulator.md").read_text().split())
    assert f"tokens live {PLATFORM_LIFETIME / 60:.0f} minutes, but for AWS STS's" in text
    assert f"(60-3600; without it {awssts.DEFAULT_DURATION} s, five minutes," in text
    assert (awssts.MIN_DURATION, awssts.MAX_DURATION) == (60, 3600)
    assert "`--lifetime` (default 3600 s)" in text
