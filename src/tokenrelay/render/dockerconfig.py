"""``docker-config``: ``{"auths": {"HOST": {"auth": base64("_token:TOKEN")}}}`` in a docker
``config.json``, for the tools that read the file but cannot run a credential helper: kaniko,
buildkit, Jib and crane-based tools in images with no shell, ``skopeo --authfile``.

The file is edited as text, never re-serialised: a small scanner finds the members of the top-level
object and of its ``auths`` with their places in the text, and only the ``auths`` members whose keys
tokenrelay owns are replaced, added or taken out. Every other key, entry and space stays byte for byte.

A member is tokenrelay's when its ``auth`` is ``_token:...``; any other under a host tokenrelay owns
is the user's, set aside (``set_aside``) before its value is replaced and put back in place when
tokenrelay's goes (JSON keeps one member of a key).

``json`` is imported where it is used: run's settings import every format for its rows of options,
and every command's parser imports those settings.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .format import USERNAME, Entry, Format, FormatError

_SPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class Member:
    """One ``"key": value`` of an object: where the key starts, and where the value starts and ends."""

    key: str
    start: int
    value_start: int
    end: int


class DockerConfig(Format):
    name = "docker-config"

    def set_aside(self, text: str, owned: Sequence[str]) -> dict[str, str]:
        if not text.strip():
            return {}
        try:
            auths = _member(text, _object(text, 0), "auths")
            members = [] if auths is None else [_member(text, auths.value_start, key) for key in owned]
        except (ValueError, IndexError) as exc:
            raise _unreadable(exc) from None
        values = {m.key: text[m.value_start : m.end] for m in members if m is not None}
        return {key: value for key, value in values.items() if not _ours(value)}

    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        text = existing if existing and existing.strip() else '{\n\t"auths": {}\n}\n'
        # the user's own values (as set aside) where tokenrelay has no entry, its own over them
        wanted = {**(aside or {}), **{entry.key: _value(entry) for entry in entries}}
        try:
            text = self._render(text, set(owned), wanted)
        except (ValueError, IndexError) as exc:
            raise _unreadable(exc) from None
        return text

    def _render(self, text: str, owned: set[str], wanted: dict[str, str]) -> str:
        import json  # lazily, as the module docstring says

        auths = _member(text, _object(text, 0), "auths")
        if auths is None:
            if not wanted:
                return text
            text = _insert(text, _object(text, 0), '"auths": {}')
            auths = _member(text, _object(text, 0), "auths")
            assert auths is not None
        start = auths.value_start  # edits happen inside ``auths``: where it opens never moves
        for key in sorted(owned | set(wanted)):
            found = _member(text, start, key)
            if found is None:
                continue
            if key in wanted:
                text = text[: found.value_start] + wanted.pop(key) + text[found.end :]
            else:
                text = _remove(text, start, found)
        for key, value in wanted.items():  # the new ones, in the order of --hosts
            text = _insert(text, start, f"{json.dumps(key)}: {value}")
        return text

    def tokens(self, text: str) -> dict[str, str]:
        import json  # lazily, as the module docstring says

        found = {}
        auths = json.loads(text).get("auths", {})
        for key, value in auths.items():
            try:
                user, _, token = base64.b64decode(value.get("auth", "")).decode().partition(":")
            except (ValueError, AttributeError):
                continue
            if user == USERNAME:
                found[key] = token
        return found


def _unreadable(exc: Exception) -> FormatError:
    return FormatError(f"it is not a JSON object ({exc}); fix it or render into another file")


def _ours(value: str) -> bool:
    """Whether an ``auths`` member's value is tokenrelay's: its ``auth`` is ``_token:...``."""
    import json  # lazily, as the module docstring says

    try:
        auth = json.loads(value).get("auth", "")
        return base64.b64decode(auth, validate=True).decode().partition(":")[0] == USERNAME
    except (ValueError, AttributeError, TypeError):
        return False


def _value(entry: Entry) -> str:
    import json  # lazily, as the module docstring says

    auth = base64.b64encode(f"{USERNAME}:{entry.token}".encode()).decode()
    return json.dumps({"auth": auth})


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _SPACE:
        index += 1
    return index


def _object(text: str, index: int) -> int:
    """Where the object starting at (or after spaces from) ``index`` opens; raises ValueError."""
    index = _skip(text, index)
    if text[index] != "{":
        raise ValueError(f"expected an object at character {index}")
    return index


def _members(text: str, start: int) -> tuple[list[Member], int]:
    """The members of the object opening at ``start``, and the index of its closing brace."""
    import json  # lazily, as the module docstring says

    index = _skip(text, start + 1)
    members: list[Member] = []
    if text[index] == "}":
        return members, index
    while True:
        key_start = index
        key, index = json.JSONDecoder().raw_decode(text, index)
        if not isinstance(key, str):
            raise ValueError(f"expected a key at character {key_start}")
        index = _skip(text, index)
        if text[index] != ":":
            raise ValueError(f"expected ':' at character {index}")
        value_start = _skip(text, index + 1)
        _, end = json.JSONDecoder().raw_decode(text, value_start)
        members.append(Member(key, key_start, value_start, end))
        index = _skip(text, end)
        if text[index] == "}":
            return members, index
        if text[index] != ",":
            raise ValueError(f"expected ',' or '}}' at character {index}")
        index = _skip(text, index + 1)


def _member(text: str, start: int, key: str) -> Member | None:
    members, _ = _members(text, _object(text, start))
    return next((m for m in members if m.key == key), None)


def _insert(text: str, start: int, member: str) -> str:
    """``member`` added as the last of the object opening at ``start``, spaced like its siblings."""
    members, close = _members(text, start)
    if not members:
        outer = text[text.rfind("\n", 0, start) + 1 : start]
        outer = outer if not outer.strip() else ""
        return text[: start + 1] + f"\n{outer}\t{member}\n{outer}" + text[close:]
    gap = text[start + 1 : members[0].start]  # the spacing before the first member, reused
    last = members[-1]
    return text[: last.end] + "," + gap + member + text[last.end :]


def _remove(text: str, start: int, member: Member) -> str:
    members, close = _members(text, start)
    at = members.index(member)
    if len(members) == 1:
        return text[: start + 1] + text[close:]
    if at + 1 < len(members):
        return text[: member.start] + text[members[at + 1].start :]
    return text[: members[at - 1].end] + text[member.end :]
