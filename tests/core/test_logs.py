"""No secret in any log line, at any level, tracebacks included."""

from __future__ import annotations

import contextlib
import io
import json
import logging

from aiohttp import web

from tokenrelay.errors import TokenUnavailable
from tokenrelay.lite import aip193
from tokenrelay.lite.redact import scrub
from tokenrelay.serving import logs
from tokenrelay.testing import refusal
from tokenrelay.tokens.sts import Issued

from ..support.core import API, Harness


async def test_debug_logs_never_show_a_token(harness: Harness) -> None:
    """Successes, refusals that echo the bearer and crashes: no token or OIDC token in the output."""
    stream = io.StringIO()
    logs.setup("debug", "json", stream)
    try:
        provider = harness.provider()
        await provider.get()

        async def echoing(request: web.Request) -> web.StreamResponse:
            leaked = request.headers["Authorization"]
            return refusal(aip193.Code.UNAUTHENTICATED, f"rejected {leaked}", 401)

        harness.service.behaviour = echoing
        provider.refresh_now()
        while provider.status().consecutive_failures == 0:
            await harness.clock.advance(0.1)

        async def crash(audience: str) -> Issued:
            raise RuntimeError(f"bug holding {harness.service.issued[0]}")

        crashing = harness.provider(fetch=crash)
        with contextlib.suppress(TokenUnavailable):
            await crashing.get()
    finally:
        logging.getLogger().handlers.clear()
    output = stream.getvalue()
    lines = [json.loads(line) for line in output.splitlines()]
    assert any(line["msg"] == "token refreshed" for line in lines)
    assert any(line["msg"] == "exchange failed" for line in lines)
    assert any("traceback" in line for line in lines)  # debug shows tracebacks...
    for secret in [*harness.service.issued, harness.id_token]:
        assert secret not in output  # ...but never a secret
        assert secret.split(".")[1] not in output


async def test_refresh_log_line_carries_what_an_operator_needs(harness: Harness) -> None:
    """The refresh event has the audience, the expiry and a short fingerprint."""
    stream = io.StringIO()
    logs.setup("info", "json", stream)
    try:
        token = await harness.provider().get()
    finally:
        logging.getLogger().handlers.clear()
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["audience"] == API and line["expireTime"] == token.expire_time
    assert line["fingerprint"] == token.fingerprint and len(token.fingerprint) == 8


def test_scrub_hides_jwts_and_bearer_values() -> None:
    """Text we do not control loses anything shaped like a credential."""
    text = scrub("Authorization: Bearer abcdefgh12345678 and eyJhbGciOi.eyJzdWIiOiJ4In0.sig")
    assert "abcdefgh12345678" not in text and "eyJzdWIiOiJ4In0" not in text
    assert text.count("[secure]") == 2


def test_setup_keeps_hpack_quiet_even_at_debug() -> None:
    """At --log-level debug the HTTP/2 library's header dumps (the token, Huffman-coded) stay off."""
    import io
    import logging

    from tokenrelay.serving import logs

    logs.setup("debug", "text", io.StringIO())
    try:
        assert not logging.getLogger("hpack").isEnabledFor(logging.DEBUG)
        assert logging.getLogger("tokenrelay").isEnabledFor(logging.DEBUG)
    finally:
        logs.setup("info", "text", io.StringIO())
