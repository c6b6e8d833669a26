"""The cluster's service-account signing keys: read again every ``--cluster-jwks-refresh`` seconds
(``run``), so that a key the cluster retires (after a compromise, say) stops being trusted within
that period, and when a token names a key we do not hold (the API server rotated its keys), then at
most once per ``min_refetch`` seconds, so that a stream of forged ``kid``s cannot turn into a stream
of requests to the API server.

A key that is published again unchanged keeps its ``PyJWK`` object, so ``publishes(key)`` tells a
verification kept from earlier whether the key it rested on is still the cluster's."""

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
Sleep = Callable[[float], Awaitable[None]]


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
        self._held: dict[str, jwt.PyJWK] = {}  # by the key's canonical JWK text: what is published now
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
            entries = json.loads(raw)["keys"]
        except (ValueError, TypeError, KeyError) as exc:
            raise KeysUnavailable(f"the JWKS cannot be read: {type(exc).__name__}: {exc}") from None
        held: dict[str, jwt.PyJWK] = {}
        for entry in entries if isinstance(entries, list) else ():
            try:
                fresh = jwt.PyJWK.from_dict(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError, TypeError, ValueError, AttributeError):
                continue  # a key of a kind we cannot use (as PyJWKSet skips it)
            text = json.dumps(entry, sort_keys=True)
            held[text] = self._held.get(text, fresh)  # unchanged: the same object (``publishes``)
        if not held:
            raise KeysUnavailable("the JWKS holds no key this agent can use")
        keys = list(held.values())
        self._held = held
        self._keys = {key.key_id: key for key in keys if key.key_id}
        self._only = keys[0] if len(keys) == 1 else None
        log.info("cluster keys loaded", extra={"keys": sorted(self._keys)})

    def publishes(self, key: jwt.PyJWK) -> bool:
        """True while the cluster's JWKS, as last read, still holds ``key``."""
        return key is self._only or self._keys.get(key.key_id or "") is key

    async def run(self, period: float, sleep: Sleep) -> None:
        """Read the keys again every ``period`` seconds until cancelled. A failed read keeps the keys
        held: refusing every pod of the node while the API server is away would be worse than a
        retired key living on for that long (a warning says so)."""
        while True:
            await sleep(period)
            try:
                await self.refresh()
            except KeysUnavailable as exc:
                log.warning("cluster keys not re-read: the keys held stay trusted", extra={"error": str(exc)})

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
