"""The delimited block: tokenrelay's lines in a line-based file (``.netrc``, ``.npmrc``) between two
comment lines, found again by them and replaced in place at every refresh.

Every line outside the block is kept byte for byte. A file without the block gets it at the top
(``.netrc``: curl and Go take the first entry for a host) or at the bottom (``.npmrc``: npm's ini
reader takes the last value of a key). The marker lines hold none of netrc's keywords, so parsers
that read comments as words (Go's) skip them as harmless pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

BEGIN = "# >>> tokenrelay: entries below are rewritten at every refresh >>>"
END = "# <<< tokenrelay <<<"


def find(lines: Sequence[str]) -> tuple[int, int] | None:
    """``(first, last)`` line indexes of the block (markers included), or None."""
    begin = next((i for i, line in enumerate(lines) if line.strip() == BEGIN), None)
    if begin is None:
        return None
    end = next((i for i in range(begin + 1, len(lines)) if lines[i].strip() == END), None)
    return None if end is None else (begin, end)


def splice(existing: str | None, body: Sequence[str], *, top: bool) -> str:
    """``existing`` with its block holding ``body`` (one entry a line); no block when ``body`` is
    empty. A new block goes at the top or the bottom of the file."""
    block = [BEGIN + "\n", *(line + "\n" for line in body), END + "\n"] if body else []
    lines = (existing or "").splitlines(keepends=True)
    found = find(lines)
    if found is not None:
        first, last = found
        if not lines[last].endswith("\n") and block:
            block[-1] = END  # the file ended at the marker: keep it so
        return "".join([*lines[:first], *block, *lines[last + 1 :]])
    if not block:
        return "".join(lines)
    if top:
        return "".join([*block, *lines])
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join([*lines, *block])


def body(text: str) -> list[str]:
    """The lines inside the block (empty when there is none)."""
    lines = text.splitlines()
    found = find(lines)
    return [] if found is None else lines[found[0] + 1 : found[1]]
