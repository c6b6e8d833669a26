"""The cluster's service-account signing keys: loaded once, fetched again only when a token names a
key we do not hold (the API server rotated its keys), and then at most once per ``min_refetch``
seconds, so that a stream of forged ``kid``s cannot turn into a stream of requests to the API server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable

import jwt

log = logging.getLogger("tokenrelay.agent")

MIN_REFETCH = 30.0
MAX_JWKS_BYTES = 1 << 20

Load = Callable[[], Awaitable[bytes]]


class KeysUnavailable(Exception):
    """The JWKS could not be loaded or read."""


class ClusterKeys:
    """The JWKS, by ``kid``; ``key`` refetches (bounded, single flight) on an unknown one."""

    def __init__(
        self, load: Load, *, clock: Callable[[], float] = time.monotonic, min_refetch: float = MIN_REFETCH
    ) -> None:
        self._load = load
        self._clock = clock
        self._min_refetch = min_refetch
        self._keys: dict[str, jwt.PyJWK] = {}
        self._only: jwt.PyJWK | None = None  # a JWKS of one key without kid: tokens without kid use it
        self._fetched_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def loaded(self) -> bool:
        return self._fetched_at is not None and bool(self._keys or self._only)

    async def refresh(self) -> None:
        """Fetch the keys now (start-up); single flight; raises KeysUnavailable."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._fetch())
            self._task.add_done_callback(self._done)
        await asyncio.shield(self._task)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if not task.cancelled():
            task.exception()

    async def _fetch(self) -> None:
        self._fetched_at = self._clock()
        raw = await self._load()
        if len(raw) > MAX_JWKS_BYTES:
            raise KeysUnavailable("the JWKS is over 1 MiB")
        try:
            data = json.loads(raw)
            keys = jwt.PyJWKSet.from_dict(data).keys
        except (ValueError, TypeError, jwt.PyJWKError, jwt.PyJWKSetError) as exc:
            raise KeysUnavailable(f"the JWKS cannot be read: {exc}") from None
        self._keys = {key.key_id: key for key in keys if key.key_id}
        self._only = keys[0] if len(keys) == 1 else None
        log.info("cluster keys loaded", extra={"keys": sorted(self._keys)})

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key ``kid`` names (the only key when the token names none); None when not held even
        after a refetch, or when a refetch is not due yet."""
        found = self._lookup(kid)
        if found is not None:
            return found
        due = self._fetched_at is None or self._clock() - self._fetched_at >= self._min_refetch
        if due or self._task is not None:
            try:
                await self.refresh()
            except KeysUnavailable as exc:
                log.warning("cluster keys not refreshed", extra={"error": str(exc)})
        return self._lookup(kid)

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            return self._only
        return self._keys.get(kid)
