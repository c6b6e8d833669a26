"""The registration table of --render formats, and ``FORMAT=PATH`` read into a ``Render``.

Adding a format touches its class (with the rows of its own options, if any), its row here, its
docs and its tests; nothing else switches on a format's name or reads its options by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .dockerconfig import DockerConfig
from .format import Format, Options
from .maven import Maven
from .netrc import Netrc
from .npmrc import Npmrc
from .template import Template

FORMATS: dict[str, type[Format]] = {cls.name: cls for cls in (Netrc, Npmrc, Maven, DockerConfig, Template)}
SPELLINGS = ", ".join(f"{name}:SRC" if cls.takes_source else name for name, cls in FORMATS.items())


@dataclass(frozen=True, slots=True)
class Render:
    """One --render: the format and the file it keeps."""

    spec: str  # as the user wrote it, for messages
    format: Format
    path: Path


def parse(spec: str, options: Options | None = None) -> Render:
    """``FORMAT=PATH`` (``template:SRC=PATH``); raises ValueError saying what is wrong."""
    kind, sep, path = spec.partition("=")
    kind, path = kind.strip(), path.strip()
    if not sep or not kind or not path:
        raise ValueError(f"{spec!r} is not FORMAT=PATH (formats: {SPELLINGS})")
    name, colon, source = kind.partition(":")
    cls = FORMATS.get(name)
    if cls is None:
        raise ValueError(f"{spec!r}: unknown format {name!r}; one of {SPELLINGS}")
    if colon and not cls.takes_source:
        raise ValueError(f"{spec!r}: {name} takes no ':'; write {name}=PATH")
    return Render(spec, cls.build(source if colon else None, options or {}), Path(path).expanduser())
