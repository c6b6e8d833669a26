"""``npmrc``: ``//HOST/:_authToken=TOKEN`` per host, for npm and pnpm (``~/.npmrc``, or the file
``NPM_CONFIG_USERCONFIG`` names). npm sends the token to a registry whose URL starts with
``//HOST/`` (the "nerf dart", port included)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import block
from .format import Entry, Format, safe_token

SUFFIX = "/:_authToken="


class Npmrc(Format):
    name = "npmrc"

    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        lines = [f"//{entry.key}{SUFFIX}{safe_token(entry.token)}" for entry in entries]
        return block.splice(existing, lines, top=False)

    def tokens(self, text: str) -> dict[str, str]:
        found = {}
        for line in block.body(text):
            key, sep, token = line.strip().partition(SUFFIX)
            if sep and key.startswith("//"):
                found[key[2:]] = token
        return found
