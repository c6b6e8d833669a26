"""git's credential helpers for each configured host, in the order git will consult them.

git collects ``credential.helper`` and every ``credential.<url>.helper`` whose URL matches, in
configuration order (system, global, local, worktree, command line), and an empty value clears
the list so far (credential.c). It asks them in turn until one answers, and after a success tells
*every* helper to ``store`` the credential: a storing helper (``store``, ``cache``, ``osxkeychain``,
``libsecret``, ``manager``...) anywhere in the list keeps the API token (``store`` in plain text),
and one ahead of tokenrelay answers with the token it kept, long expired. The fix is an empty
``helper =`` line right before ``helper = tokenrelay``, in a section git reads after the storing one.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from ..helpers.hosts import Host
from ..lite.netloc import is_loopback
from .report import Check, failed, passed, skipped, warning

STORING = frozenset(
    {"store", "cache", "osxkeychain", "libsecret", "manager", "manager-core", "wincred", "gnome-keyring"}
)
SCOPE_ORDER = ("system", "global", "local", "worktree", "command")
_DEFAULT_PORTS = {"https": "443", "http": "80"}


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``credential.*`` line as git reports it."""

    scope: str
    origin: str
    key: str  # lower-cased section and name; the URL keeps its case
    value: str

    @property
    def url(self) -> str | None:
        """The ``<url>`` of ``credential.<url>.<name>``; None for a bare ``credential.<name>``."""
        middle = self.key[len("credential.") :]
        url, _, _ = middle.rpartition(".")
        return url or None

    @property
    def name(self) -> str:
        return self.key.rpartition(".")[2]


def entries(environ: Mapping[str, str], cwd: str | None = None) -> list[Entry] | str:
    """Every ``credential.*`` entry in git's order, or why git could not be asked."""
    git = shutil.which("git", path=environ.get("PATH"))
    if git is None:
        return "git is not installed here"
    result = subprocess.run(
        [git, "config", "--null", "--show-scope", "--show-origin", "--get-regexp", r"^credential\."],
        env=dict(environ),
        cwd=cwd,
        capture_output=True,
        check=False,
        timeout=30,
    )
    if result.returncode not in (0, 1):  # 1: no such entry
        return f"git config failed: {result.stderr.decode(errors='replace').strip()}"
    fields = result.stdout.decode(errors="replace").split("\0")
    found = []
    for i in range(0, len(fields) - 2, 3):
        key, _, value = fields[i + 2].partition("\n")
        found.append(Entry(fields[i], fields[i + 1], key, value))
    return found


def _split(url: str) -> tuple[str | None, str, str | None, str]:
    """(scheme, host, port, path) of a config URL; scheme None for git's partial URLs (``host/path``)."""
    scheme = None
    rest = url
    if "://" in url:
        scheme, rest = url.split("://", 1)
        scheme = scheme.lower()
    hostport, _, path = rest.partition("/")
    hostport = hostport.rpartition("@")[2]
    host, sep, port = hostport.partition(":")
    return scheme, host.lower().rstrip("."), (port if sep else None), path


def _host_matches(pattern: str, host: str) -> bool:
    want, have = pattern.split("."), host.split(".")
    return len(want) == len(have) and all(w in ("*", h) for w, h in zip(want, have, strict=True))


def matches(entry: Entry, target: Host, scheme: str = "https") -> bool:
    """True when git applies ``entry`` to ``scheme://host[:port]/...`` (urlmatch.c, minus user names)."""
    url = entry.url
    if url is None:
        return True
    if "@" in url.partition("://")[2].partition("/")[0]:
        return False  # a user-scoped entry: only for URLs that name that user
    entry_scheme, host, port, _path = _split(url)
    if entry_scheme is not None and entry_scheme != scheme:
        return False
    if not _host_matches(host, target.name):
        return False
    default = _DEFAULT_PORTS.get(scheme)
    return (port or default) == (target.port or default)


def kind(value: str) -> str:
    """``ours``, ``storing`` or ``other`` for a helper value."""
    word = value.strip().lstrip("!").split(" ", 1)[0] if value.strip() else ""
    base = word.rsplit("/", 1)[-1].removeprefix("git-credential-")
    if base == "tokenrelay":
        return "ours"
    if base in STORING:
        return "storing"
    return "other"


def helper_list(found: list[Entry], target: Host, scheme: str = "https") -> list[Entry]:
    """The helpers git will ask for ``scheme://host``, in order, after empty values reset the list."""
    helpers: list[Entry] = []
    for entry in found:
        if entry.name != "helper" or not matches(entry, target, scheme):
            continue
        if entry.value == "":
            helpers = []
        else:
            helpers.append(entry)
    return helpers


def check(host: Host, found: list[Entry], environ: Mapping[str, str]) -> Check:
    name = f"clients.git.{host.netloc}"
    # Plain http gets a token only on loopback (helpers.hosts.match): look there for it too.
    scheme = "https"
    if is_loopback(host.name) and not _has_ours(helper_list(found, host)):
        scheme = "http" if _has_ours(helper_list(found, host, "http")) else scheme
    url = f"{scheme}://{host.netloc}"
    helpers = helper_list(found, host, scheme)
    order = ", ".join(f"{e.value} ({_where(e)})" for e in helpers)
    if not any(kind(e.value) == "ours" for e in helpers):
        return skipped(
            name,
            f"git is not set up to ask tokenrelay for {url}" + (f"; it asks: {order}" if helpers else ""),
            "if it is a git host: " + "; ".join(_commands(url, found, helpers)),
        )
    storing = [e for e in helpers if kind(e.value) == "storing"]
    first_ours = next(i for i, e in enumerate(helpers) if kind(e.value) == "ours")
    if storing:
        ahead = [e for e in storing if helpers.index(e) < first_ours]
        harm = (
            "answers first with the token it kept, long expired (fatal: Authentication failed)"
            if ahead
            else "keeps the API token git hands it after each success"
        )
        return failed(
            name,
            f"git asks, for {url}: {order}; the storing helper {storing[0].value!r} {harm}",
            "run:\n" + "\n".join(_commands(url, found, helpers)),
            helpers=[e.value for e in helpers],
        )
    ahead_other = helpers[:first_ours]
    if ahead_other:
        return warning(
            name,
            f"git asks, for {url}: {order}; {ahead_other[0].value!r} comes before tokenrelay and "
            "may answer instead",
            "run:\n" + "\n".join(_commands(url, found, helpers)),
            helpers=[e.value for e in helpers],
        )
    if kind_needs_path(helpers[first_ours].value) and not shutil.which(
        "git-credential-tokenrelay", path=environ.get("PATH")
    ):
        return failed(
            name,
            f"git asks tokenrelay for {url}, but git-credential-tokenrelay is not on PATH",
            "install tokenrelay where git runs (pip install tokenrelay) and put its bin directory on "
            "PATH, or give the helper's full path",
        )
    return passed(name, f"git asks, for {url}: {order}", helpers=[e.value for e in helpers])


def _has_ours(helpers: list[Entry]) -> bool:
    return any(kind(entry.value) == "ours" for entry in helpers)


def kind_needs_path(value: str) -> bool:
    """A bare helper name is run as git-credential-<name> from PATH."""
    word = value.strip().split(" ", 1)[0]
    return not word.startswith(("!", "/"))


def _where(entry: Entry) -> str:
    return f"{entry.scope} {entry.origin.removeprefix('file:')}"


def _commands(url: str, found: list[Entry], helpers: list[Entry]) -> list[str]:
    """The ``git config`` commands that leave tokenrelay alone in git's list for the host.

    They go in the scope of the last helper to override (so that git reads them after it), into a
    section of their own at the end of that file: removing and re-adding the section puts it there.
    """
    to_beat = [e for e in helpers if kind(e.value) != "ours"]
    last = max((SCOPE_ORDER.index(e.scope) for e in to_beat if e.scope in SCOPE_ORDER), default=1)
    scope = SCOPE_ORDER[max(last, 1)]
    if scope == "command":
        return [
            "drop the storing helper from `git -c` / GIT_CONFIG_COUNT / GIT_CONFIG_PARAMETERS, then "
            + "; ".join(_commands_in("global", url, found))
        ]
    return _commands_in(scope, url, found)


def _commands_in(scope: str, url: str, found: list[Entry]) -> list[str]:
    mine = [e for e in found if e.scope == scope and e.url == url]
    commands = []
    if mine:
        commands.append(f"git config --{scope} --remove-section {shlex.quote('credential.' + url)}")
    key = shlex.quote(f"credential.{url}.helper")
    commands.append(f"git config --{scope} --add {key} ''")
    commands.append(f"git config --{scope} --add {key} tokenrelay")
    for entry in mine:
        if entry.name != "helper":  # keep the section's other settings (username, useHttpPath...)
            commands.append(f"git config --{scope} --add {shlex.quote(entry.key)} {shlex.quote(entry.value)}")
    return commands
