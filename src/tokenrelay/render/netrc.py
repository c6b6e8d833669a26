"""``netrc``: ``machine HOST login _token password TOKEN`` per host, for everything that reads
``~/.netrc`` or ``$NETRC``: curl (``--netrc-file``) and libcurl (git over HTTP), wget, pip and uv,
Python's requests, and Go's ``GOAUTH=netrc``.

A netrc ``machine`` is a host name without a port (curl, wget and requests compare the name only),
so two hosts on one name but different ports and audiences cannot share the file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..helpers.hosts import Host
from . import block
from .format import USERNAME, Entry, Format, safe_token


class Netrc(Format):
    name = "netrc"

    def key(self, host: Host) -> str:
        return host.name

    def check(self, hosts: Sequence[Host]) -> None:
        audiences: dict[str, str] = {}
        for host in hosts:
            earlier = audiences.setdefault(host.name, host.audience)
            if earlier != host.audience:
                raise ValueError(
                    f"netrc names machines without a port, so {host.name} cannot get two audiences "
                    f"({earlier!r} and {host.audience!r}); render one of them into another file"
                )

    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        seen: dict[str, Entry] = {}
        for entry in entries:
            seen.setdefault(entry.key, entry)  # one line per machine: ports share it
        lines = [
            f"machine {entry.key} login {USERNAME} password {safe_token(entry.token)}"
            for entry in seen.values()
        ]
        return block.splice(existing, lines, top=True)

    def tokens(self, text: str) -> dict[str, str]:
        found = {}
        for line in block.body(text):
            words = line.split()
            if len(words) == 6 and words[0] == "machine" and words[4] == "password":
                found[words[1]] = words[5]
        return found
