"""One --render's read-modify-write at a time, across processes: an advisory lock beside the file.

Two tokenrelay processes rendering one file (a sidecar and an ``exec``, two ``run``s) each read the
render and its aside file, change them and write them back. Interleaved, one's clean stop can remove
the aside file between the other's read and its write, and the second's clean stop then drops the
user's own entry. ``held`` takes ``fcntl.flock`` on the render's name plus ``SUFFIX`` (mode 0600)
around each such step: not on the render (it is replaced by rename, so a lock on it guards the old
inode only) nor on the aside file (it comes and goes). A flock dies with its process, so a crash
leaves at most the file, never a stale lock. The wait is bounded: a lock held over ``WAIT`` seconds is
an OSError naming the lock file, never a hang. The holder removes the file before it lets go (no file
is left beside the user's between steps); a waiter that then locks the removed file sees it is no
longer at the path and tries again.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..serving import sinks
from ..serving.parentdirs import make_parents

SUFFIX = ".tokenrelay-lock"
MODE = 0o600
# seconds: a step takes milliseconds, so a longer hold is a wedged peer, not a busy one
WAIT = 10.0
POLL = 0.01


def path_for(render: Path) -> Path:
    """The lock file of the render at ``render``."""
    return render.with_name(render.name + SUFFIX)


@contextmanager
def held(
    render: Path,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the render's lock for the block; raises OSError (held elsewhere over WAIT seconds, a
    symbolic link at the lock's path)."""
    where = path_for(render)
    fd = _acquire(where, clock, sleep)
    try:
        yield
    finally:
        with suppress(OSError):
            where.unlink()  # precondition: holds its lock, so this is the file at the path
        os.close(fd)  # releases the flock


def _acquire(where: Path, clock: Callable[[], float], sleep: Callable[[float], None]) -> int:
    deadline = clock() + WAIT
    while True:
        sinks.refuse_symlink(where)
        make_parents(where.parent, MODE)
        fd = os.open(where, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
        except BaseException:
            os.close(fd)
            raise
        else:
            if _still_there(fd, where):
                return fd
            os.close(fd)
            continue  # its holder removed it: the lock that counts is on the file now at the path
        if clock() >= deadline:
            raise OSError(
                errno.EWOULDBLOCK,
                f"another process has held the lock {where} for over {WAIT:.0f} s (another tokenrelay "
                "rendering the same file, stuck?): stop it, or give this --render a path of its own",
            )
        sleep(POLL)


def _still_there(fd: int, where: Path) -> bool:
    """Whether the file open at ``fd`` is still the one at ``where``."""
    try:
        now = where.lstat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)
