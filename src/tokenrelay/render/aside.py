"""The user's own entries that a render replaces, kept in a file beside it until they go back.

Maven's ``settings.xml`` and docker's ``config.json`` name an entry by the user's own key (a
``<server>`` id, an ``auths`` host), so the user may already have one for a host tokenrelay renders.
Such an entry (``Format.set_aside``) is written here before the render that replaces it, and the
render puts it back where it stood once tokenrelay's entry goes (a clean stop); the file is removed
only after that write. A file, not memory: after a crash (SIGKILL, an OOM kill, a power cut) the
render holds tokenrelay's stale entry and this file the user's, and the next start finds it here,
keeps it, and its clean stop gives it back. The file is the render's name plus ``SUFFIX``, mode
0600 whatever --render-mode says (it holds the user's credential), written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..lite.regularfile import read_regular
from ..serving import sinks

SUFFIX = ".tokenrelay-aside"
MAX_FILE = 1 << 20
MODE = 0o600
ABOUT = (
    "Your own entries of {path} under the hosts tokenrelay renders there, set aside while it does. "
    "tokenrelay's clean stop puts them back where they stood and removes this file; should tokenrelay "
    "not run there again, put them back yourself."
)


def path_for(render: Path) -> Path:
    """Where the entries set aside from the render at ``render`` are kept."""
    return render.with_name(render.name + SUFFIX)


def load(render: Path) -> dict[str, str]:
    """The entries set aside from ``render``, by key ({} when none are); raises OSError saying what
    is wrong with the file (never guessed at: the user's entries are in it)."""
    where = path_for(render)
    sinks.refuse_symlink(where)
    try:
        raw = read_regular(str(where), MAX_FILE)
    except FileNotFoundError:
        return {}
    try:
        document = json.loads(raw) if len(raw) <= MAX_FILE else None
    except (ValueError, UnicodeDecodeError):
        document = None
    entries = document.get("entries") if isinstance(document, dict) else None
    if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
        raise OSError(
            f"{where} is not what tokenrelay wrote: put the entries it holds back into {render.name} "
            "yourself and remove it"
        )
    return entries


def save(render: Path, entries: dict[str, str]) -> None:
    """Keep ``entries`` (all of them: the file is replaced whole); raises OSError."""
    document = {"about": ABOUT.format(path=render), "entries": entries}
    sinks.write_regular(path_for(render), (json.dumps(document, indent=2) + "\n").encode(), MODE)


def remove(render: Path) -> None:
    """The entries are back in the render: forget them."""
    path_for(render).unlink(missing_ok=True)
