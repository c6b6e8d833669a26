"""When to exchange: one provider per audience keeps a token fresh; ``TokenProviders`` holds them all.

The policy, after google-auth's credentials and botocore's refreshers:

* A token is refreshed at 45-50% of its life (jitter, so a fleet started together does not refresh
  together; never later than half, so half the life is always left to ride out an outage), off the
  request path: callers get the current token at once while it runs.
* Callers wait only when no valid token exists (first start, after expiry), and only boundedly.
* Single flight: one exchange per audience at a time, shared by every caller through
  ``asyncio.shield`` so that a caller that gives up never cancels it.
* A failure keeps the old token until it expires; retries follow full-jitter backoff, spread over
  half the old token's remaining life while it is valid (see ``_record_failure``).
* Everything is scheduled on the injected monotonic clock, so a wall-clock jump moves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import TokenRelayError, TokenUnavailable, UnknownAudience
from ..lite.jwtclaims import numeric_claim, unverified_claims
from ..lite.lifetime import JITTER, REFRESH_FRACTION, lifetime_of
from ..lite.names import DEFAULT_WAIT_TIMEOUT, env, flag
from ..lite.redact import scrub
from ..lite.timestamps import format_timestamp
from .backoff import Backoff
from .sts import Issued
from .token import READY_SECONDS, Token, TokenState

log = logging.getLogger("tokenrelay.provider")

MIN_LIFETIME = 1.0  # a token with less life than this is refused as already expired
# While a valid token is held, retries spread over this fraction of its remaining life.
RETRY_SPREAD = 0.5

DEFAULT_BACKOFF = Backoff(base=1.0, cap=30.0)
NOT_RETRYABLE_STEPS = 31  # past any backoff's doubling: its ceiling is its cap

Fetch = Callable[[str], Awaitable[Issued]]
Sleep = Callable[[float], Awaitable[None]]


class Observer(Protocol):
    """Hears about every exchange: metrics and file sinks hang off this."""

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None: ...

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Status:
    """A provider's state, for /readyz, metrics and /v1/status."""

    audience: str
    token: Token | None
    error: str | None
    consecutive_failures: int
    last_exchange_wall: float | None = None  # Unix time the last exchange ended; None before one
    last_exchange_ok: bool | None = None
    retry_in: float = 0.0  # seconds the backoff still holds the next attempt back
    next_refresh_in: float | None = None  # seconds until the schedule exchanges again; None while one runs


class TokenProvider:
    """Keeps one audience's token fresh."""

    def __init__(
        self,
        audience: str,
        fetch: Fetch,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        wait_timeout: float = DEFAULT_WAIT_TIMEOUT,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.audience = audience
        self._fetch = fetch
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = backoff
        self._wait_timeout = wait_timeout
        self._observers = tuple(observers)
        self._token: Token | None = None
        self._task: asyncio.Task[Token] | None = None
        self._error: TokenRelayError | None = None
        self._failures = 0
        self._next_attempt = 0.0  # monotonic: no automatic attempt before this
        self._last_exchange: tuple[float, bool] | None = None  # (wall time it ended, succeeded)
        self._changed = asyncio.Event()  # wakes the background loop to re-plan

    # -- what callers use -------------------------------------------------------------------

    @property
    def token(self) -> Token | None:
        return self._token

    def status(self) -> Status:
        error = self._error.message if self._error is not None else None
        last_wall, last_ok = self._last_exchange or (None, None)
        due = None if self._task is not None else max(0.0, self._delay_until_due())
        return Status(
            self.audience, self._token, error, self._failures, last_wall, last_ok, self.retry_in(), due
        )

    def current(self) -> Token | None:
        """The token while it may be handed out, starting its refresh when it is stale; None when
        no valid token is held. Never awaits."""
        token = self._token
        if token is None:
            return None
        now = self._clock()
        state = token.state(now)
        if state is TokenState.FRESH:
            return token
        if state is TokenState.STALE:
            if self._task is None and now >= self._next_attempt:
                self._start()
            return token
        return None

    async def get(self) -> Token:
        """The current token; starts a refresh when it is stale; waits only when none is valid."""
        token = self.current()
        if token is not None:
            return token
        now = self._clock()
        task = self._task
        if task is None:
            if now < self._next_attempt and self._error is not None:
                raise TokenUnavailable(self._unavailable_reason(now))
            task = self._start()
        return await self._await(task)

    async def reject(self, rejected: Token) -> Token:
        """The upstream refused ``rejected``: refresh once for every caller that saw it fail."""
        current = self._token
        if (
            current is not None
            and current.value != rejected.value
            and current.state(self._clock()) is not TokenState.EXPIRED
        ):
            return current
        task = self._task
        if task is None:
            now = self._clock()
            if now < self._next_attempt:
                # The last exchange failed moments ago: a burst of 401s during an outage must not
                # turn into a burst of exchanges.
                raise TokenUnavailable(self._unavailable_reason(now))
            task = self._start()
        return await self._await(task)

    @property
    def in_flight(self) -> asyncio.Task[Token] | None:
        """The exchange running now, if any."""
        return self._task

    def refresh_now(self) -> None:
        """Start a refresh now, backoff or not (SIGHUP)."""
        self._next_attempt = 0.0
        if self._task is None:
            self._start()

    @property
    def exchanging(self) -> bool:
        """True while an exchange is under way."""
        return self._task is not None

    @property
    def last_error(self) -> TokenRelayError | None:
        """Why the last exchange failed; None once one has succeeded."""
        return self._error

    def retry_in(self) -> float:
        """Seconds until the backoff allows the next attempt."""
        return max(0.0, self._next_attempt - self._clock())

    def ready(self, now: float | None = None) -> str | None:
        """None when the token has at least READY_SECONDS left, else why not."""
        now = self._clock() if now is None else now
        token = self._token
        if token is not None and token.remaining(now) >= READY_SECONDS:
            return None
        why = "no token yet" if token is None else f"token expires in {max(0.0, token.remaining(now)):.0f}s"
        if self._error is not None:
            why += f"; last exchange failed: {self._error.message}"
        return f"audience {self.audience}: {why}"

    # -- the background schedule --------------------------------------------------------------

    async def run(self) -> None:
        """Refresh on schedule until cancelled."""
        while True:
            delay = self._delay_until_due()
            if delay > 0:
                await self._sleep_or_wake(delay)
                continue
            task = self._task or self._start()
            try:
                await asyncio.shield(task)
            except TokenRelayError:
                pass  # recorded and logged by _exchange
            except Exception as exc:
                # A bug after the exchange itself (an observer, the log line): the schedule must
                # outlive it, and say so, or tokens silently stop being refreshed.
                log.debug("refresh crashed", exc_info=True, extra={"audience": self.audience})
                log.error(
                    "refresh failed: internal error",
                    extra={"audience": self.audience, "error": type(exc).__name__},
                )

    def _delay_until_due(self) -> float:
        now = self._clock()
        if self._task is not None:
            return 3600.0  # woken by _changed when it ends
        due = self._next_attempt
        if self._token is not None and self._token.state(now) is not TokenState.EXPIRED:
            due = max(due, self._token.refresh_at)
        return due - now

    async def _sleep_or_wake(self, delay: float) -> None:
        self._changed.clear()
        sleeper = asyncio.ensure_future(self._sleep(delay))
        waker = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()

    # -- the exchange itself ------------------------------------------------------------------

    def _start(self) -> asyncio.Task[Token]:
        # precondition: no task in flight. Shared state is set before any await so that every
        # caller arriving later joins this task instead of starting another.
        task = asyncio.ensure_future(self._exchange())
        self._task = task
        task.add_done_callback(self._finished)
        self._changed.set()
        return task

    def _finished(self, task: asyncio.Task[Token]) -> None:
        if self._task is task:
            self._task = None
        if not task.cancelled():
            task.exception()  # retrieved: failures are recorded and logged in _exchange
        self._changed.set()

    async def _await(self, task: asyncio.Task[Token]) -> Token:
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel that lands as the
            # exchange fails, and raises the failure instead (exec's start then retried on after
            # SIGTERM until --wait-timeout)
            async with asyncio.timeout(self._wait_timeout):
                return await asyncio.shield(task)
        except TimeoutError:
            raise TokenUnavailable(
                f"no token for audience {self.audience} yet: the exchange has not finished after "
                f"{self._wait_timeout:g}s (--wait-timeout)"
            ) from None
        except TokenRelayError as exc:
            raise TokenUnavailable(f"no token for audience {self.audience}: {exc.message}") from None

    async def _exchange(self) -> Token:
        started = self._clock()
        try:
            issued = await self._fetch(self.audience)
            received = self._clock()
            token = self._token_from(issued, received)
        except TokenRelayError as exc:
            self._record_failure(exc, self._clock() - started)
            raise
        except Exception as exc:
            # A bug, not an upstream condition: keep serving the old token, report it plainly.
            log.debug("exchange crashed", exc_info=True, extra={"audience": self.audience})
            words = " ".join(scrub(str(exc)).split())[:300]  # its own words say what tripped
            said = f": {words}" if words else ""
            error = TokenRelayError(f"internal error during the exchange: {type(exc).__name__}{said}")
            self._record_failure(error, self._clock() - started)
            raise error from None
        self._token = token
        self._error = None
        self._failures = 0
        self._next_attempt = 0.0
        self._last_exchange = (self._wall(), True)
        log.info(
            "token refreshed",
            extra={
                "audience": self.audience,
                "fingerprint": token.fingerprint,
                "expireTime": token.expire_time,
                "refreshIn": round(token.refresh_at - received, 1),
            },
        )
        for observer in self._observers:
            with self._observing(observer):
                observer.exchanged(token, duration=received - started, issued=issued)
        return token

    def _record_failure(self, error: TokenRelayError, duration: float) -> None:
        self._error = error
        self._failures += 1
        self._last_exchange = (self._wall(), False)
        retry_after = error.retry_after
        now = self._clock()
        held = self._token
        window = 0.0
        usable = 0.0
        if held is not None and held.state(now) is not TokenState.EXPIRED:
            # Nobody waits while a valid token is held, so there is no hurry: a fleet that failed
            # together (a token-service outage) must not retry together the moment it is back.
            # Spreading over half the remaining life keeps the load after recovery under 3x the
            # steady rate (bench/herd.py, docs/scale.md) and still leaves about fifteen tries
            # before expiry; near expiry the exponential backoff takes over again.
            usable = held.remaining(now) - held.margin
            window = RETRY_SPREAD * held.remaining(now)
        # A refusal that waits for someone to change a configuration (not retryable) is retried at
        # the backoff's ceiling from the start: no burst of exchanges while nothing can change.
        steps = self._failures if error.retryable else max(self._failures, NOT_RETRYABLE_STEPS)
        delay = self._backoff.delay(steps, self._rng, retry_after, window)
        if usable > 0 and retry_after is None:
            delay = min(delay, usable)  # one more try while the token is still good, backoff or not
        self._next_attempt = now + delay
        log.warning(
            "exchange failed",
            extra={
                "audience": self.audience,
                "error": error.message,
                "consecutiveFailures": self._failures,
                "retryIn": round(delay, 2),
                "servingUntil": held.expire_time if held else None,
            },
        )
        for observer in self._observers:
            with self._observing(observer):
                observer.failed(self.audience, error, duration=duration, consecutive=self._failures)

    @contextlib.contextmanager
    def _observing(self, observer: Observer) -> Iterator[None]:
        """An observer's bug (metrics, a sink) is logged; the token and the schedule stand."""
        try:
            yield
        except Exception as exc:
            log.debug("observer crashed", exc_info=True, extra={"audience": self.audience})
            log.error(
                "observer failed: internal error",
                extra={
                    "audience": self.audience,
                    "observer": type(observer).__name__,
                    "error": type(exc).__name__,
                },
            )

    def _token_from(self, issued: Issued, received: float) -> Token:
        """Work out the new token's life from the token itself, then schedule its refresh."""
        wall_now = self._wall()
        # Measured on the issuer's own clock (its Date header, else the token's iat), so that a skew
        # between us and it changes nothing.
        lifetime = lifetime_of(issued.token, issued.expiry, wall_now, issued.server_time)
        expire_wall = wall_now + lifetime
        if lifetime <= MIN_LIFETIME:
            claims = unverified_claims(issued.token)
            exp = numeric_claim(claims, "exp") if claims else None
            when = format_timestamp(exp if exp is not None else expire_wall)
            raise TokenRelayError(
                f"token service returned a token for audience {self.audience} that expires at "
                f"{when}, {lifetime:.0f}s from now: too short-lived to use"
            )
        fraction = REFRESH_FRACTION * self._rng.uniform(1 - JITTER, 1)
        return Token(
            value=issued.token,
            audience=self.audience,
            received_at=received,
            lifetime=lifetime,
            refresh_at=received + lifetime * fraction,
            expire_wall=expire_wall,
        )

    def _unavailable_reason(self, now: float) -> str:
        why = self._error.message if self._error else "no exchange has succeeded yet"
        return (
            f"no token for audience {self.audience}: {why} "
            f"(next attempt in {max(0.0, self._next_attempt - now):.1f}s)"
        )


class TokenProviders:
    """Every configured audience's provider; the TokenSource the local API and proxy use."""

    def __init__(self, providers: Sequence[TokenProvider]) -> None:
        if not providers:
            raise ValueError("at least one audience is needed")
        self._providers = {provider.audience: provider for provider in providers}
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def audiences(self) -> tuple[str, ...]:
        return tuple(self._providers)

    def provider(self, audience: str) -> TokenProvider:
        try:
            return self._providers[audience]
        except KeyError:
            raise UnknownAudience(
                f"audience {audience!r} is not configured; start tokenrelay run with "
                f"{flag('audience')} {audience} (env {env('audience')}) to keep a token for it"
            ) from None

    def current(self, audience: str) -> Token | None:
        provider = self._providers.get(audience)
        return provider.current() if provider is not None else None

    async def get(self, audience: str) -> Token:
        return await self.provider(audience).get()

    async def reject(self, audience: str, token: Token) -> Token:
        return await self.provider(audience).reject(token)

    def ready(self) -> str | None:
        """None when every audience is ready, else the reasons, joined."""
        reasons = [r for p in self._providers.values() if (r := p.ready()) is not None]
        return "; ".join(reasons) if reasons else None

    def statuses(self) -> list[Status]:
        """Every audience's state, the API's first (/v1/status)."""
        return [provider.status() for provider in self._providers.values()]

    def refresh_all(self) -> None:
        for provider in self._providers.values():
            provider.refresh_now()

    def start(self) -> None:
        """Run every provider's schedule in the background."""
        self._tasks = [asyncio.ensure_future(p.run()) for p in self._providers.values()]

    async def stop(self) -> None:
        """Stop the schedules and any exchange in flight: the session it runs on closes next."""
        exchanges = [p.in_flight for p in self._providers.values() if p.in_flight is not None]
        for running in (*self._tasks, *exchanges):
            running.cancel()
        await asyncio.gather(*self._tasks, *exchanges, return_exceptions=True)
        self._tasks = []
