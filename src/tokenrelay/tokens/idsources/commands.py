"""Run a platform's own command that prints an OIDC token (``buildkite-agent``, ``circleci``).

The command is found on the ``PATH`` of the environment tokenrelay was given, runs with that
environment and no stdin, and is bounded: past the timeout it is killed and reported in one line.
Its output is capped; a failure quotes its own words (stderr's first line), cleaned of anything
shaped like a token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ...errors import IdTokenError
from ...lite.oidccheck import MAX_ID_TOKEN_BYTES
from .httpfetch import platform_words

if TYPE_CHECKING:
    import asyncio


def which(command: str, environ: Mapping[str, str]) -> str | None:
    """The command's path on the environment's PATH, else None."""
    import shutil

    return shutil.which(command, path=environ.get("PATH"))


async def output(argv: Sequence[str], *, environ: Mapping[str, str], timeout: float, what: str) -> str:
    """The command's standard output as text; IdTokenError naming ``what`` when it fails."""
    import asyncio  # (and shutil): run's settings read the table of sources, and must stay cheap

    path = which(argv[0], environ)
    if path is None:
        raise IdTokenError(f"{argv[0]} is not on PATH ({what})")
    try:
        process = await asyncio.create_subprocess_exec(
            path,
            *argv[1:],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(environ),
        )
    except OSError as exc:
        raise IdTokenError(f"cannot run {path} ({what}): {exc.strerror or exc}") from None
    try:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel (SIGTERM, the sidecar
        # stopping) that lands as the command ends, and hands on its output instead
        async with asyncio.timeout(timeout):
            out, err = await process.communicate()
    except TimeoutError:
        _kill(process)
        await process.wait()
        raise IdTokenError(f"{what} did not finish within {timeout:g}s and was stopped") from None
    except asyncio.CancelledError:
        # tokenrelay stopping: the command must not outlive its read. Not waited for: on 3.11 wait()
        # also waits for its pipes, which a child of the command may hold open; the loop reaps it.
        _kill(process)
        raise
    if process.returncode != 0:
        words = platform_words(err) or platform_words(out)
        said = f": {words}" if words else ""
        raise IdTokenError(f"{what} failed with exit status {process.returncode}{said}")
    if len(out) > 2 * MAX_ID_TOKEN_BYTES:
        raise IdTokenError(f"{what} printed over {2 * MAX_ID_TOKEN_BYTES // 1024} KiB: not an OIDC token")
    try:
        return out.decode("ascii")
    except UnicodeDecodeError:
        raise IdTokenError(f"{what} printed something that is not ASCII text: not an OIDC token") from None


def _kill(process: asyncio.subprocess.Process) -> None:
    import contextlib

    with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
        process.kill()
