"""``tokenrelay run --once``: one exchange per audience, the --token-file and --render files written,
then exit (a --render is left in place: the job's next steps read it).

For init containers and CI steps. The exit status is the whole answer: 0 when every audience got a
token and every file was written, 1 otherwise, with one line on stderr saying why. A transient
failure (the token service unreachable, timing out, a 5xx or 429) is tried again with the usual
backoff for as long as --wait-timeout allows, so that one blip does not fail a CI job; a refusal
(say, claims that do not match the identity) fails at once.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TextIO

from ..errors import ExchangeError, TokenRelayError, TokenUnavailable
from ..tokens.provider import TokenProvider, TokenProviders
from ..tokens.token import Token


class Sink(Protocol):
    """A --token-file or a --render: written once from the tokens by audience."""

    @property
    def path(self) -> object: ...

    def write_tokens(self, tokens: Mapping[str, Token]) -> None: ...


log = logging.getLogger("tokenrelay.once")

PREFIX = "tokenrelay run --once"


async def run(
    providers: TokenProviders,
    sinks: Sequence[Sink],
    stderr: TextIO | None = None,
    *,
    budget: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Get a token for every audience (retrying within ``budget`` seconds) and write the sinks;
    the process exit status."""
    out = stderr or sys.stderr
    deadline = clock() + budget
    # Wait for every audience, failures included: returning at the first failure would let the
    # other exchanges' log lines follow the one line that is meant to be the last word.
    results = await asyncio.gather(
        *(
            get_within(providers.provider(audience), deadline, clock, sleep)
            for audience in providers.audiences
        ),
        return_exceptions=True,
    )
    tokens: list[Token] = []
    for result in results:
        if isinstance(result, TokenRelayError):
            print(f"{PREFIX}: {result.message}", file=out)
            return 1
        if isinstance(result, BaseException):
            raise result
        tokens.append(result)
    by_audience = {token.audience: token for token in tokens}
    for sink in sinks:
        try:
            sink.write_tokens(by_audience)
        except TokenRelayError as exc:
            print(f"{PREFIX}: {exc.message}", file=out)
            return 1
    log.info(
        "once: done",
        extra={
            "audiences": [t.audience for t in tokens],
            "expireTimes": [t.expire_time for t in tokens],
            "files": [str(sink.path) for sink in sinks],
        },
    )
    return 0


async def get_within(
    provider: TokenProvider,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
) -> Token:
    """The provider's first token, waiting out retryable failures until ``deadline`` (also what
    ``tokenrelay exec`` waits for before it starts its command); raises TokenRelayError."""
    while True:
        try:
            return await provider.get()
        except TokenUnavailable:
            error = provider.last_error
            wait = provider.retry_in()
            # Only the token service's failures are waited out, and only those its answer marks
            # retryable (stsanswer decides); a missing OIDC token or a refusal fails at once.
            if not isinstance(error, ExchangeError) or not error.retryable or clock() + wait >= deadline:
                raise
            await sleep(wait)
