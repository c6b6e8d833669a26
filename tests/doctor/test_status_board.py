"""What /v1/status reports of a provider, on a FakeClock: the last exchange's time and outcome, the
failure count, the backoff and the next refresh."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from tokenrelay.errors import ExchangeError
from tokenrelay.lite.redact import fingerprint
from tokenrelay.lite.timestamps import format_timestamp
from tokenrelay.sidecar.status import StatusBoard, render
from tokenrelay.testing import FakeClock, make_jwt
from tokenrelay.tokens.provider import TokenProvider
from tokenrelay.tokens.sts import Issued

from ..support.doctor import Platform

AUDIENCE = "https://api.example.test"


class Script:
    """A fetch that issues 20-minute tokens, or refuses while ``refusing`` is set."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.refusing = False
        self.issued: list[str] = []

    async def __call__(self, audience: str) -> Issued:
        if self.refusing:
            raise ExchangeError("token service refused: claimMatch says no", status=403, code=7)
        now = int(self.clock.wall())
        token = make_jwt({"aud": audience, "iat": now, "exp": now + 1200, "jti": f"t{len(self.issued)}"})
        self.issued.append(token)
        return Issued(token)


async def test_status_follows_success_then_failures() -> None:
    """A success records its time and "ok"; later failures record "failed", count up, and the next
    refresh becomes the backoff's next attempt while the old token is still served."""
    clock = FakeClock(wall_start=1_800_000_000.0)
    script = Script(clock)
    provider = TokenProvider(
        AUDIENCE, script, clock=clock, wall=clock.wall, sleep=clock.sleep, rng=random.Random(3)
    )
    board = StatusBoard("file /oidc", clock=clock, wall=clock.wall)

    assert provider.status().last_exchange_wall is None
    token = await provider.get()
    status = provider.status()
    assert status.last_exchange_wall == clock.wall() and status.last_exchange_ok is True
    assert status.consecutive_failures == 0 and status.retry_in == 0
    assert status.next_refresh_in == token.refresh_at - clock()

    clock.tick(token.refresh_at - clock() + 1)  # past the refresh point: stale, still served
    script.refusing = True
    for expected in (1, 2):
        await provider.get()  # serves the old token, starts a refresh in the background
        for _ in range(10):
            await asyncio.sleep(0)
        status = provider.status()
        assert status.consecutive_failures == expected
        clock.tick(status.retry_in)
    status = provider.status()
    assert status.last_exchange_ok is False and status.error is not None
    failed_at = status.last_exchange_wall

    document = board.document([provider.status()])
    entry = document["audiences"][0]
    assert entry["fingerprint"] == fingerprint(script.issued[0])
    assert entry["lastExchange"] == {
        "time": format_timestamp(failed_at or 0),
        "outcome": "failed",
        "error": "token service refused: claimMatch says no",
    }
    assert entry["consecutiveFailures"] == 2
    assert entry["state"] == "stale"
    assert entry["nextRefreshInSeconds"] == entry["backoffSeconds"]
    assert "claimMatch says no" in render(document)
    assert script.issued[0] not in str(document) + render(document)


def test_the_oidc_token_expiry_is_reported_and_forwarded() -> None:
    """The board records the OIDC token's expiry at each read and passes it on (to the metrics)."""
    clock = FakeClock(wall_start=1_800_000_000.0)
    seen: list[float | None] = []
    board = StatusBoard("file /oidc", forward=seen.append, clock=clock, wall=clock.wall)
    assert board.document([])["idToken"]["expireTime"] is None
    board.id_token(clock.wall() + 600)
    clock.tick(100)
    id_token = board.document([])["idToken"]
    assert id_token["expiresInSeconds"] == 500
    assert id_token["source"] == "file /oidc"
    assert board.document([])["uptimeSeconds"] == 100
    assert seen == [1_800_000_600.0]


async def test_the_status_names_autos_choice_once_it_is_made(platform: Platform, tmp_path: Path) -> None:
    """With --id-token-source auto on a cloud, /v1/status's idToken.source says so before the first
    exchange, and names the metadata server auto chose after it."""
    from tokenrelay.tokens.idsources import SOURCES, SourceInputs

    host = platform.url.removeprefix("http://")
    environ = {"GCE_METADATA_HOST": host, "AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:9"}
    inputs = SourceInputs(environ=environ, audience=platform.url, id_token_file=str(tmp_path / "none"))
    source = SOURCES["auto"].build(inputs)
    board = StatusBoard(lambda: source.description)
    assert (
        board.document([])["idToken"]["source"]
        == "auto: the cloud's metadata server, asked at the first exchange"
    )
    await source.read()
    assert board.document([])["idToken"]["source"] == (
        f"the GCP metadata server at {host} (auto: Google Cloud's metadata server answered)"
    )
