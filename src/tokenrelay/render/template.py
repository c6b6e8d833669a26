"""``template:SRC``: a file of the user's, ``SRC``, with ``${token}``, ``${expires_at}``,
``${audience}`` and ``${host}`` replaced, written to the render's path at every refresh: for
``HTTP_AUTH``-style variables, bundler's ``BUNDLE_<HOST>`` settings, an env file and the like.

String substitution only, never code: the four placeholders, spelled exactly so, and nothing else
is touched (no ``$name`` shorthand, no escapes). The values are those of the first host of --hosts.
The whole output file is tokenrelay's, so a clean stop removes it. ``SRC`` is re-read at each
render: an edit to the template shows at the next refresh.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..lite.regularfile import read_regular
from .format import Entry, Format, FormatError, Options

MAX_TEMPLATE = 1 << 20
PLACEHOLDERS = ("${token}", "${expires_at}", "${audience}", "${host}")


class Template(Format):
    name = "template"
    takes_source = True

    def __init__(self, source: str) -> None:
        self.source = source

    @classmethod
    def build(cls, source: str | None, options: Options) -> Format:
        if not source:
            raise ValueError("template needs its source file: template:SRC=PATH")
        return cls(str(Path(source).expanduser()))

    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        if not entries:
            return None
        entry = entries[0]
        try:
            raw = read_regular(self.source, MAX_TEMPLATE)
        except OSError as exc:
            raise FormatError(f"its template {self.source} cannot be read: {exc.strerror or exc}") from None
        if len(raw) > MAX_TEMPLATE:
            raise FormatError(f"its template {self.source} is over 1 MiB")
        text = raw.decode(errors="replace")
        values = dict(
            zip(
                PLACEHOLDERS,
                (entry.token, entry.expires_at, entry.host.audience, entry.host.netloc),
                strict=True,
            )
        )
        # One pass over the text: a value that itself holds a placeholder is never expanded again.
        return _PATTERN.sub(lambda match: values[match.group(0)], text)

    def tokens(self, text: str) -> dict[str, str]:
        return {}  # a template's text cannot be read back; the doctor looks for the token in it


_PATTERN = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))
