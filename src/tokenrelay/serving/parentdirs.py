"""Create the missing directories above a socket or a token file, never wider than the file needs.

``mkdir -p`` gives each new directory the process umask's mode: 0777 under ``umask 000``, where any
local user could then replace the socket or the token file by renaming their own into place. Each
directory created here is 0700 plus search (``x``) permission for the group or others when the
file's own mode lets them in, so they can reach the file by its path but neither list nor change
the directory. Directories that already exist are left as they are: they are the operator's.
"""

from __future__ import annotations

import os
from pathlib import Path


def search_mode(file_mode: int) -> int:
    """The mode for a directory created above a file of ``file_mode``."""
    mode = 0o700
    if file_mode & 0o060:
        mode |= 0o010
    if file_mode & 0o006:
        mode |= 0o001
    return mode


def make_parents(directory: Path, file_mode: int) -> None:
    """Create ``directory`` and its missing ancestors with ``search_mode(file_mode)``; raises OSError."""
    missing: list[Path] = []
    current = directory
    while not os.path.lexists(current):  # lexists: a dangling symlink is not missing
        missing.append(current)
        current = current.parent
    mode = search_mode(file_mode)
    for path in reversed(missing):
        try:
            path.mkdir(mode)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs, as an existing directory would be
        path.chmod(mode)  # mkdir's mode went through the umask
