"""``maven``: a ``<server>`` per host in Maven's ``settings.xml`` (``~/.m2/settings.xml`` or
``mvn -s FILE``), with ``<id>`` the host (or the id --render-maven-ids gives it), username ``_token``
and the token as the password. Maven sends them to every repository whose ``<id>`` matches.

The file is edited as text, never re-serialised, so the user's comments, order and spacing stay
byte for byte: tokenrelay's ``<server>`` elements are the ones whose ``<id>`` it owns, found again
by that id and replaced in place; new ones go at the end of ``<servers>``. Comments and CDATA are
masked out first, so a commented-out ``<server>`` is never taken for a live one.

A ``<server>`` is tokenrelay's when its username is ``_token``; any other ``<server>`` under an id
tokenrelay owns is the user's, set aside (``set_aside``) before it is replaced and put back where it
stood when tokenrelay's goes (Maven would take only one ``<server>`` of an id).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import HostsError
from ..helpers.hosts import Host, join_netloc, parse_spec, split_hostport
from ..options import Option, as_list
from .format import USERNAME, Entry, Format, FormatError, Options

NEW_FILE = """<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <servers>
  </servers>
</settings>
"""
_HIDDEN = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>", re.DOTALL)
_SERVER = re.compile(r"<server(?:\s[^>]*)?>.*?</server\s*>", re.DOTALL)
_ID = re.compile(r"<id\s*>\s*([^<]*?)\s*</id\s*>")
_OURS = re.compile(rf"<username\s*>\s*{re.escape(USERNAME)}\s*</username\s*>")
_PASSWORD = re.compile(r"<password\s*>\s*([^<]*?)\s*</password\s*>")
_SERVERS_OPEN = re.compile(r"<servers\s*>")
_SERVERS_CLOSE = re.compile(r"</servers\s*>")
_SETTINGS_CLOSE = re.compile(r"</settings\s*>")


class Maven(Format):
    name = "maven"

    def __init__(self, ids: dict[str, str] | None = None) -> None:
        self._ids = ids or {}

    options = (
        Option(
            "render_maven_ids",
            "The <id> of a host's <server> in a maven --render (repeatable); the host[:port] otherwise.",
            kind="list",
            repeatable=True,
            default=(),
            metavar="HOST=ID",
            convert=lambda raw: _server_ids(as_list(raw)),
        ),
    )

    @classmethod
    def build(cls, source: str | None, options: Options) -> Format:
        ids = {}
        for spec in options.get("render_maven_ids", ()):
            host, _, server_id = spec.partition("=")
            parts = split_hostport(host.strip())
            if parts is not None:
                ids[join_netloc(*parts)] = server_id.strip()
        return cls(ids)

    def key(self, host: Host) -> str:
        return self._ids.get(host.netloc, host.netloc)

    def set_aside(self, text: str, owned: Sequence[str]) -> dict[str, str]:
        _well_formed(text)
        found: dict[str, str] = {}
        for match, server_id in _servers(text):
            if server_id in owned and not _OURS.search(match.group(0)):
                mine = text[match.start() : match.end()]
                # two of one id (Maven warns, and uses one): kept together, each on its own line
                found[server_id] = (
                    f"{found[server_id]}\n{_column(text, match.start())}{mine}"
                    if server_id in found
                    else mine
                )
        return found

    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        text = existing if existing and existing.strip() else NEW_FILE
        _well_formed(text)
        wanted: dict[str, Entry | str] = {**(aside or {}), **{entry.key: entry for entry in entries}}
        owned_ids = set(owned) | set(wanted)
        # From the end backwards, so that each edit leaves the earlier spans where they were.
        done: set[str] = set()
        step = _step(text)
        spans = [(m.start(), m.end(), server_id) for m, server_id in _servers(text) if server_id in owned_ids]
        for start, end, server_id in reversed(spans):
            entry = wanted.get(server_id)
            first = not any(s < start and i == server_id for s, _, i in spans)
            if entry is not None and first:
                text = text[:start] + _server(entry, _column(text, start), step) + text[end:]
                done.add(server_id)
            else:
                text = _cut(text, start, end)
        missing = [entry for key, entry in wanted.items() if key not in done]
        if missing:
            text = _append(text, missing)
        return text

    def tokens(self, text: str) -> dict[str, str]:
        found = {}
        for match, server_id in _servers(text):
            password = _PASSWORD.search(match.group(0))
            if password and "<username>" + USERNAME + "</username>" in match.group(0):
                found[server_id] = password.group(1)
        return found


def _well_formed(text: str) -> None:
    # the XML parsers load only with a maven --render: run's settings import this module's row
    from xml.etree import ElementTree

    try:
        ElementTree.fromstring(text.encode())  # noqa: S314 - the user's own file, not remote input
    except ElementTree.ParseError as exc:
        raise FormatError(f"it is not well-formed XML ({exc}); fix it or render into another file") from None


def _masked(text: str) -> str:
    """``text`` with comments, CDATA and processing instructions blanked, same length."""
    return _HIDDEN.sub(lambda m: " " * len(m.group(0)), text)


def _servers(text: str) -> list[tuple[re.Match[str], str]]:
    masked = _masked(text)
    found = []
    for match in _SERVER.finditer(masked):
        server_id = _ID.search(match.group(0))
        if server_id:
            found.append((match, server_id.group(1)))
    return found


def _column(text: str, index: int) -> str:
    """The whitespace between the start of ``index``'s line and ``index``."""
    line_start = text.rfind("\n", 0, index) + 1
    lead = text[line_start:index]
    return lead if not lead.strip() else ""


def _step(text: str) -> str:
    """The file's indentation step: how much deeper its first ``<server>`` sits than ``<servers>``."""
    masked = _masked(text)
    opening, server = _SERVERS_OPEN.search(masked), _SERVER.search(masked)
    if opening and server:
        outer, inner = _column(text, opening.start()), _column(text, server.start())
        if inner.startswith(outer) and len(inner) > len(outer):
            return inner[len(outer) :]
    return "  "


def _server(entry: Entry | str, indent: str, step: str = "  ") -> str:
    """tokenrelay's ``<server>`` for ``entry``, or the user's own (its text, as set aside)."""
    if isinstance(entry, str):
        return entry
    from xml.sax.saxutils import escape

    inner = indent + step
    return (
        f"<server>\n{inner}<id>{escape(entry.key)}</id>\n{inner}<username>{USERNAME}</username>\n"
        f"{inner}<password>{escape(entry.token)}</password>\n{indent}</server>"
    )


def _cut(text: str, start: int, end: int) -> str:
    """``text`` without ``[start, end)``, and without its line when nothing else is on it."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if not text[line_start:start].strip() and not text[end:line_end].strip():
        return text[:line_start] + text[line_end:]
    return text[:start] + text[end:]


def _append(text: str, entries: Sequence[Entry | str]) -> str:
    masked = _masked(text)
    close = _last(_SERVERS_CLOSE, masked)
    if close is None or _SERVERS_OPEN.search(masked) is None:
        settings_close = _last(_SETTINGS_CLOSE, masked)
        if settings_close is None:
            raise FormatError("it has no <settings> element to add <servers> to")
        indent = _column(text, settings_close) + "  "
        block = f"{indent}<servers>\n{indent}</servers>\n"
        head = text[:settings_close]
        if not head.endswith("\n"):
            block = "\n" + block
        text = head.rstrip(" \t") + block + _column(text, settings_close) + text[settings_close:]
        masked = _masked(text)
        close = _last(_SERVERS_CLOSE, masked)
        assert close is not None
    indent = _column(text, close)
    siblings = [match.start() for match, _ in _servers(text) if match.start() < close]
    step = _step(text)
    inner = _column(text, siblings[-1]) if siblings else indent + step  # line up with the user's
    added = "".join(f"{inner}{_server(entry, inner, step)}\n" for entry in entries)
    line_start = close - len(indent) if indent or text[close - 1 : close] == "\n" else close
    if line_start == close and not text[:close].endswith("\n"):
        added = "\n" + added
    return text[:line_start] + added + text[line_start:]


def _last(pattern: re.Pattern[str], text: str) -> int | None:
    matches = list(pattern.finditer(text))
    return matches[-1].start() if matches else None


def _server_ids(specs: Sequence[str]) -> tuple[str, ...]:
    """--render-maven-ids' ``HOST=ID`` specs, each checked; ValueError naming the one that is not."""
    for spec in specs:
        host_text, sep, server_id = spec.partition("=")
        try:
            parse_spec(host_text)
        except HostsError:
            sep = ""
        if not sep or not server_id.strip():
            raise ValueError(f"{spec!r} is not HOST=ID")
    return tuple(dict.fromkeys(specs))
