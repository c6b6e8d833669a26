"""Bind the local API's Unix socket so that it is never reachable with a wider mode than configured.

``bind`` then ``chmod`` leaves a moment where the socket has the umask's mode. Instead the socket is
bound inside a fresh 0700 directory next to its final path, given its mode there, and renamed into
place: nobody but us can reach it until it already has the configured mode.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
import tempfile
from pathlib import Path

from ..errors import ConfigError
from ..lite.names import where
from .parentdirs import make_parents

_WHERE = where("socket")
# sun_path holds 108 bytes on Linux, 104 on macOS and the BSDs, the terminating NUL among them.
MAX_PATH_BYTES = (108 if sys.platform.startswith("linux") else 104) - 1
STAGING_PREFIX = ".tokenrelay-"
_RANDOM = 8  # characters tempfile.mkdtemp adds to a prefix


def longest_bound(path: str) -> int:
    """Bytes of the longest path ``bind(path)`` binds or hands to clients: its staging directory's
    socket beside ``path`` (``.tokenrelay-XXXXXXXX/s``), or ``path`` itself when its name is longer."""
    target = Path(path)
    staged = len(os.fsencode(target.parent / (STAGING_PREFIX + "x" * _RANDOM) / "s"))
    return max(staged, len(os.fsencode(target)))


def bind(path: str, mode: int, backlog: int = 1024) -> socket.socket:
    """A listening Unix socket at ``path`` with permission bits ``mode``; raises ConfigError."""
    target = Path(path)
    if longest_bound(path) > MAX_PATH_BYTES:
        raise ConfigError(
            f"{_WHERE}: {path} is too long for a Unix socket ({longest_bound(path)} bytes with the "
            f"name it is bound under first, at most {MAX_PATH_BYTES}): choose a shorter path"
        )
    try:
        make_parents(target.parent, mode)
    except OSError as exc:
        raise ConfigError(f"{_WHERE}: cannot create {target.parent}: {exc.strerror}") from None
    _clear_stale(target)
    try:
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target.parent))
    except OSError as exc:
        raise ConfigError(f"{_WHERE}: cannot write in {target.parent}: {exc.strerror}") from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staged = staging / "s"
    try:
        sock.bind(str(staged))
        staged.chmod(mode)
        staged.rename(target)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{_WHERE}: cannot bind {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            staged.unlink()
        with contextlib.suppress(OSError):
            staging.rmdir()
    return sock


def _clear_stale(target: Path) -> None:
    """Remove a socket file nobody listens on; refuse to touch anything else."""
    try:
        info = target.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise ConfigError(f"{_WHERE}: {target} exists and is not a socket; remove it or choose another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    owner = f"another user (uid {info.st_uid})"
    try:
        probe.connect(str(target))
    except (ConnectionRefusedError, FileNotFoundError):
        try:
            target.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:  # e.g. a sticky /tmp: only its owner (or root) may remove it
            raise ConfigError(
                f"{_WHERE}: {target} is a stale socket of {owner} that this user cannot remove "
                f"({exc.strerror}); remove it as that user or root, or choose another path"
            ) from None
        return
    except PermissionError:
        raise ConfigError(
            f"{_WHERE}: {target} is a socket of {owner} that this user may not connect to; if nothing "
            "serves on it, remove it as that user or root, or choose another path"
        ) from None
    except OSError:
        pass  # e.g. a timeout: someone holds it but does not accept; treat as live
    finally:
        probe.close()
    raise ConfigError(
        f"{_WHERE}: another process (another tokenrelay?) is serving on {target}; "
        "stop it or choose another path"
    )


def inode(path: str) -> int:
    return os.lstat(path).st_ino


def remove(path: str, bound_inode: int) -> None:
    """Unlink ``path`` if it is still the socket we bound (not one a successor has bound since)."""
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        if stat.S_ISSOCK(info.st_mode) and info.st_ino == bound_inode:
            Path(path).unlink()
