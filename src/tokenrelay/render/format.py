"""What every --render format is: one small interface, one class per format (see ``table``).

A format turns the entries tokenrelay owns into a file's text, given the file as it stands. It
changes only what it owns: the lines between its markers (``block``), or the ``<server>`` and
``auths`` members whose ids are its hosts'. Everything else in the user's file stays byte for byte.
``render`` with no entries takes tokenrelay's entries out (a clean stop); ``None`` means the file
should go. Pure text in, text out: the sink does the reading, writing and refusing.

A format whose entries are named by the user's own keys (Maven's ``<server>`` ids, docker's
``auths`` hosts) can meet the user's own entry for a key it owns. It is never lost: ``set_aside``
gives its text, which the sink keeps in a file beside the render before the entry is replaced, and
``render`` puts it back, where it stood, in place of tokenrelay's entry as soon as that entry goes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..helpers import USERNAME
from ..helpers.hosts import Host
from ..options import Option

__all__ = ["USERNAME", "Entry", "Format", "FormatError", "Options"]


class FormatError(ValueError):
    """The file as it stands cannot be rendered into (not JSON, not XML, ...); says what to fix."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One host's credential as a format writes it: ``key`` is the host as the file names it."""

    key: str
    host: Host
    token: str = field(repr=False)
    expires_at: str  # the upstream's timestamp form


# The values of the formats' own options (their ``options`` rows), by option name.
Options = Mapping[str, Any]


class Format(ABC):
    """One file format of --render."""

    name: ClassVar[str]
    # template:SRC takes the part after the colon; the others take none.
    takes_source: ClassVar[bool] = False
    # The format's own settings, beyond --render and --render-mode: rows that ``tokenrelay run``'s
    # table takes in (so each is a flag, a variable, a TOML key and a docs row, checked by its
    # converter), and whose values ``build`` gets by name.
    options: ClassVar[tuple[Option, ...]] = ()

    @classmethod
    def build(cls, source: str | None, options: Options) -> Format:
        """The format for one --render, given the values of every format's options by name (those
        not set at their default); raises ValueError on a wrong ``source``."""
        return cls()

    def key(self, host: Host) -> str:
        """How the file names ``host`` (its ``host[:port]`` unless the format says otherwise)."""
        return host.netloc

    def check(self, hosts: Sequence[Host]) -> None:  # noqa: B027 - most formats tell every host apart
        """Raise ValueError when the file cannot tell these hosts apart."""

    def set_aside(self, text: str, owned: Sequence[str]) -> dict[str, str]:
        """The user's own entries in ``text`` under keys in ``owned`` (which ``render`` replaces), as
        their text by key; raises FormatError as ``render`` does. Formats whose entries never share a
        key with the user's (a marked block, a file of their own) have none."""
        return {}

    @abstractmethod
    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        """The file's new text: ``existing`` (None when there is no file) with the entries whose
        keys are in ``owned`` replaced by ``entries``, and an owned key with no entry given back its
        ``aside`` text (the user's entry, from ``set_aside``) when there is one; None when the file
        should be removed. Raises FormatError when ``existing`` cannot be read as this format."""

    @abstractmethod
    def tokens(self, text: str) -> dict[str, str]:
        """The tokens tokenrelay's entries in ``text`` hold, by key (for the doctor)."""


def safe_token(token: str) -> str:
    """``token`` when it can sit in a line-based file; raises FormatError otherwise."""
    if not token or any(c.isspace() or c in "\"'#\\" for c in token):
        raise FormatError("the token holds a space, quote, '#' or backslash, which this file cannot carry")
    return token
