"""A herd of sidecars against one token service that goes down and comes back, on virtual time.

Ten thousand real ``TokenProvider`` objects run their real schedules in one process, on an asyncio
event loop whose clock jumps straight to the next timer instead of waiting for it: hours of fleet
behaviour take seconds. The token service is an in-process function (no sockets) that fails every
exchange during the outage and answers a JWT otherwise. Every exchange attempt is counted per
BIN seconds; see docs/scale.md for what the figures mean.

    python bench/herd.py                       # 10,000 providers, 10-minute outage
    python bench/herd.py --providers 2000 --outage 1500
    python bench/herd.py --pods 100000 --nodes 1000 --accounts-per-node 10   # sidecars against agents

The last line printed is::

    providers=N outage_s=S peak_per_s=P mean_per_s=M peak_to_mean=R expired=E

With ``--pods``, the same schedule runs twice in one invocation: once with a sidecar per pod (one
provider each), once with a node agent per node (docs/agent.md: one provider per service account of
the node, behind the node's exchange limiter, ``--max-exchanges-per-second``), and a line for each:

    mode=sidecars providers=... / mode=agents providers=...
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import selectors
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tokenrelay.agent.limiter import ExchangeLimiter
from tokenrelay.agent.options import DEFAULT_MAX_EXCHANGES_PER_SECOND
from tokenrelay.errors import ExchangeError, TokenRelayError
from tokenrelay.testing import make_jwt
from tokenrelay.tokens.provider import TokenProvider
from tokenrelay.tokens.sts import Issued
from tokenrelay.tokens.token import Token, TokenState

BIN = 10.0  # seconds per counting bin: one-second bins at this scale are mostly Poisson noise
WALL0 = 1_800_000_000.0  # the virtual wall clock's origin


class WarpSelector(selectors.DefaultSelector):
    """Polls without blocking; when nothing is ready, moves the loop's clock to the next timer."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            raise RuntimeError("virtual time: nothing scheduled and nothing ready; the simulation is stuck")
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """asyncio's own loop, timers and all, on a clock that only WarpSelector moves."""

    def __init__(self) -> None:
        self._warp = WarpSelector()
        super().__init__(self._warp)

    def time(self) -> float:
        return self._warp.now


@dataclass
class TokenService:
    """The simulated token service: counts attempts per bin, fails them during the outage."""

    lifetime: float
    outage: tuple[float, float]
    latency: float
    clock: VirtualTimeLoop
    attempts: Counter[int] = field(default_factory=Counter)
    minted: int = 0

    async def __call__(self, audience: str) -> Issued:
        now = self.clock.time()
        self.attempts[int(now // BIN)] += 1
        await asyncio.sleep(self.latency)
        start, end = self.outage
        if start <= now < end:
            raise ExchangeError("token service unavailable (HTTP 503)", status=503)
        self.minted += 1
        wall = WALL0 + self.clock.time()
        exp = int(wall + self.lifetime)
        return Issued(
            token=make_jwt({"jti": f"t{self.minted}", "aud": audience, "iat": int(wall), "exp": exp})
        )

    def rate(self, start: float, end: float) -> tuple[float, float]:
        """(peak, mean) attempts per second over the bins in [start, end)."""
        bins = range(int(start // BIN), int(end // BIN))
        counts = [self.attempts.get(b, 0) for b in bins]
        return max(counts) / BIN, sum(counts) / (len(counts) * BIN)


class ExpiryWatch:
    """Observer: counts providers that held only an expired token when their next one arrived."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._held: dict[str, Token] = {}
        self.expired = 0

    def exchanged(self, token: Token, *, duration: float, issued: Issued) -> None:
        before = self._held.get(token.audience)
        # The exchange started `duration` ago: judge the old token as of then.
        if before is not None and before.state(self._clock() - duration) is TokenState.EXPIRED:
            self.expired += 1
        self._held[token.audience] = token

    def failed(self, audience: str, error: TokenRelayError, *, duration: float, consecutive: int) -> None:
        pass


Fetch = Callable[[str], Awaitable[Issued]]


def behind_limiters(service: TokenService, nodes: int, loop: VirtualTimeLoop) -> Callable[[int], Fetch]:
    """Provider i's fetch through its node's ExchangeLimiter, as the agent's Exchanges calls it."""
    limiters = [ExchangeLimiter(DEFAULT_MAX_EXCHANGES_PER_SECOND, clock=loop.time) for _ in range(nodes)]

    def fetch_for(index: int) -> Fetch:
        limiter = limiters[index % nodes]

        async def fetch(audience: str) -> Issued:
            await limiter.acquire()
            return await service(audience)

        return fetch

    return fetch_for


async def herd(providers: int, outage_s: float, lifetime: float, seed: int, nodes: int | None = None) -> str:
    """``providers`` on their schedules; with ``nodes``, provider i is a key of node i % nodes's
    agent and goes through that node's limiter."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop)
    rng = random.Random(seed)
    # Pods start at random over one refresh interval, then run two lifetimes to reach steady state.
    spread = lifetime / 2
    outage_start = 2 * lifetime
    outage_end = outage_start + outage_s
    finish = outage_end + lifetime
    service = TokenService(lifetime, (outage_start, outage_end), latency=0.05, clock=loop)
    watch = ExpiryWatch(loop.time)
    fetch_for = behind_limiters(service, nodes, loop) if nodes else (lambda index: service)
    fleet = [
        TokenProvider(
            f"https://api{i}.example",
            fetch_for(i),
            clock=loop.time,
            wall=lambda: WALL0 + loop.time(),
            rng=random.Random(rng.random()),
            observers=(watch,),
        )
        for i in range(providers)
    ]
    tasks: list[asyncio.Task[None]] = []

    def launch(provider: TokenProvider) -> None:
        tasks.append(loop.create_task(provider.run()))

    for provider in fleet:
        loop.call_later(rng.uniform(0, spread), launch, provider)

    await asyncio.sleep(finish)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    expired = watch.expired + sum(
        1 for p in fleet if p.token is None or p.token.state(loop.time()) is TokenState.EXPIRED
    )

    _, mean = service.rate(lifetime, outage_start)  # the steady state before the outage
    peak, _ = service.rate(outage_end, finish)  # the worst bin from recovery on
    during_peak, _ = service.rate(outage_start, outage_end)
    print(
        f"# steady {mean:.2f}/s; during the outage peak {during_peak:.1f}/s (failing); "
        f"after recovery peak {peak:.1f}/s; {service.minted} tokens minted",
        file=sys.stderr,
    )
    return (
        f"providers={providers} outage_s={outage_s:g} peak_per_s={peak:.1f} mean_per_s={mean:.2f} "
        f"peak_to_mean={peak / mean:.2f} expired={expired}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--providers", type=int, default=10_000)
    parser.add_argument("--outage", type=float, default=600.0, help="seconds the token service is down")
    parser.add_argument("--lifetime", type=float, default=3600.0, help="token lifetime, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pods", type=int, help="sidecars against agents: pods in the fleet")
    parser.add_argument("--nodes", type=int, default=1000, help="with --pods: nodes, one agent each")
    parser.add_argument(
        "--accounts-per-node", type=int, default=10, help="with --pods: service accounts per node"
    )
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # 10,000 providers log every failure; the counts are the output
    if args.pods is None:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            print(runner.run(herd(args.providers, args.outage, args.lifetime, args.seed)))
        return 0
    keys = args.nodes * args.accounts_per_node  # one identity and audience per service account
    runs = (("sidecars", args.pods, None), ("agents", keys, args.nodes))
    for mode, providers, nodes in runs:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            line = runner.run(herd(providers, args.outage, args.lifetime, args.seed, nodes))
        print(f"mode={mode} {line}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
