"""Directories tokenrelay creates above its socket and token files, and sockets other users left.

Under ``umask 000`` a ``mkdir -p`` makes 0777 directories, in which any local user can rename their
own socket or token file over ours; a dead socket another user left in a sticky directory cannot be
removed by us and must be reported, not crash the start.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.serving.sinks import write_private_file
from tokenrelay.serving.unixsocket import bind

from ..support.otheruser import OTHER_UID, other_user_install


@pytest.fixture
def no_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("file_mode", "dir_mode"), [(0o600, 0o700), (0o660, 0o710), (0o666, 0o711)])
def test_socket_parents_are_private_under_umask_000(no_umask: None, file_mode: int, dir_mode: int) -> None:
    """Missing directories above --socket are 0700, plus search permission for whom the mode lets in."""
    base = Path(f"/tmp/trdir-{os.getpid()}")
    try:
        sock = bind(str(base / "a" / "b" / "s.sock"), file_mode)
        sock.close()
        assert (mode(base), mode(base / "a"), mode(base / "a" / "b")) == (dir_mode,) * 3
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(("file_mode", "dir_mode"), [(0o600, 0o700), (0o640, 0o710), (0o644, 0o711)])
def test_token_file_parents_are_private_under_umask_000(
    no_umask: None, tmp_path: Path, file_mode: int, dir_mode: int
) -> None:
    """Missing directories above --token-file are 0700, plus search permission for its readers."""
    write_private_file(tmp_path / "a" / "b" / "token", b"t", file_mode)
    assert (mode(tmp_path / "a"), mode(tmp_path / "a" / "b")) == (dir_mode, dir_mode)
    assert mode(tmp_path) == 0o700  # pytest's own: an existing directory is left alone


def test_a_dead_socket_of_another_user_in_a_sticky_directory_is_one_line() -> None:
    """A non-root sidecar meeting another user's dead socket in /tmp-like space: exit 2, one line."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to act as two other users")
    tokenrelay = other_user_install().tokenrelay  # the checkout may sit where nobody cannot reach
    sticky = Path(f"/tmp/trsticky-{os.getpid()}")
    sticky.mkdir()
    try:
        sticky.chmod(0o1777)
        dead = sticky / "s.sock"
        with socket.socket(socket.AF_UNIX) as left:
            left.bind(str(dead))
        dead.chmod(0o777)
        os.chown(dead, 65533, 65533)
        result = subprocess.run(
            [
                str(tokenrelay),
                "run",
                "--auth-url=http://127.0.0.1:9",
                "--api-url=http://127.0.0.1:9",
                "--identity=o/i",
                "--id-token-env=OIDC",
                f"--socket={dead}",
            ],
            env={"OIDC": "x", "PATH": "/usr/bin:/bin"},
            user=OTHER_UID,
            group=OTHER_UID,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        shutil.rmtree(sticky, ignore_errors=True)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"tokenrelay run: --socket (env TOKENRELAY_SOCKET): {dead} is a stale socket of another user "
        "(uid 65533) that this user cannot remove (Operation not permitted); remove it as that user or "
        "root, or choose another path\n"
    )
