"""A platform token file rotated the way kubelet rotates a projected service-account token.

kubelet's AtomicWriter layout: the token lives in a timestamped directory ``..2026_01_02_03_04_05.N``;
``..data`` is a symlink to the current one and ``token`` a symlink to ``..data/token``. A rotation
writes a new directory, points a temporary symlink at it and renames that over ``..data`` (one atomic
step, so a reader sees the old token or the new one, never a missing or half-written file), then
removes the old directory. kubelet renews once a token is past 80% of its life; so does this.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ...lite.lifetime import lifetime_of
from ...lite.redact import fingerprint
from ...tokens.backoff import Backoff

log = logging.getLogger("tokenrelay.emulator.tokenfile")

REFRESH_FRACTION = 0.8
DATA_LINK = "..data"


class RotatingTokenFile:
    """Keeps ``directory/name`` holding a live token from ``mint``; start()/stop() like a Component."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        mint: Callable[[], Awaitable[str]],
        *,
        name: str = "token",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        backoff: Backoff | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.name = name
        self._mint = mint
        self._clock = clock
        self._sleep = sleep
        self._backoff = backoff or Backoff(base=1.0, cap=30.0)
        self._task: asyncio.Task[None] | None = None
        self._counter = 0
        self.rotations = 0
        self.next_rotation: float | None = None  # monotonic time of the next planned rotation

    @property
    def path(self) -> Path:
        """The path to hand to a reader (``--id-token-file``)."""
        return self.directory / self.name

    async def rotate(self) -> float:
        """Write a fresh token now; its lifetime in seconds (``exp - iat``)."""
        token = await self._mint()
        lifetime = lifetime_of(token, None, time.time())
        self._write(token)
        self.rotations += 1
        log.info(
            "platform token written",
            extra={"path": str(self.path), "fingerprint": fingerprint(token), "lifetime_s": lifetime},
        )
        return lifetime

    def _write(self, token: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._counter += 1
        stamp = time.strftime("..%Y_%m_%d_%H_%M_%S", time.gmtime()) + f".{os.getpid()}.{self._counter}"
        fresh = self.directory / stamp
        fresh.mkdir(mode=0o700)
        target = fresh / self.name
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        data = self.directory / DATA_LINK
        old = str(data.readlink()) if data.is_symlink() else None
        tmp = self.directory / f"{DATA_LINK}_tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(stamp)
        tmp.rename(data)  # the atomic swap
        link = self.path
        if not link.is_symlink():
            link.symlink_to(Path(DATA_LINK) / self.name)
        if old is not None and old != stamp:
            shutil.rmtree(self.directory / old, ignore_errors=True)

    async def run(self) -> None:
        """Rotate forever: at 80% of each token's life, sooner again after a failure."""
        failures = 0
        while True:
            try:
                lifetime = await self.rotate()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                delay = self._backoff.ceiling(failures)
                log.warning(
                    "cannot mint a platform token; retrying",
                    extra={"error": type(exc).__name__, "retry_in_s": round(delay, 1)},
                )
            else:
                failures = 0
                delay = lifetime * REFRESH_FRACTION
            self.next_rotation = self._clock() + delay
            await self._sleep(delay)

    async def start(self) -> None:
        """Write the first token (so a reader finds one at once), then rotate in the background."""
        lifetime = await self.rotate()
        self.next_rotation = self._clock() + lifetime * REFRESH_FRACTION
        self._task = asyncio.create_task(self._after(lifetime * REFRESH_FRACTION))

    async def _after(self, delay: float) -> None:
        await self._sleep(delay)
        await self.run()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
