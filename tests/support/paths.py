"""The one short socket directory: pytest's tmp_path can exceed the 108-byte limit of a socket path."""

from __future__ import annotations

import tempfile
from pathlib import Path


def short_dir(prefix: str = "tr-", mode: int = 0o700) -> Path:
    """A new directory directly under /tmp (``mode`` 0755 when other users' processes must reach it);
    the caller removes it."""
    where = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    where.chmod(mode)
    return where


def require_reachable(uid: int, *paths: Path) -> None:
    """Skip unless ``uid`` (owning none of them, in none of their groups) may enter every directory
    above ``paths``: a checkout under a 0700 directory (``mktemp -d``) shuts other users out of its
    venv and sources, and a test that runs tokenrelay as one of them cannot run there."""
    import stat

    import pytest

    for path in paths:
        for directory in path.resolve().parents:
            info = directory.stat()
            allowed = stat.S_IXUSR if info.st_uid == uid else stat.S_IXOTH
            if not info.st_mode & allowed:
                pytest.skip(
                    f"uid {uid} cannot enter {directory} (mode {stat.S_IMODE(info.st_mode):o}), where "
                    f"{path} is: check the repository out where other users can reach it"
                )
