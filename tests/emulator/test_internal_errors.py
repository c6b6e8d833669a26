"""An emulator bug still answers in the upstream's error shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.test_utils import TestClient

from tokenrelay.emulator.app import _errors
from tokenrelay.lite import aip193


async def test_crash_is_a_500_with_an_aip193_body(
    aiohttp_client: Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]],
) -> None:
    """A handler that raises gets code 13 INTERNAL in an AIP-193 body, not aiohttp's plain text."""

    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("bug")

    app = web.Application(middlewares=[_errors])
    app.router.add_get("/iam/v2beta1/groups", broken)
    client = await aiohttp_client(app)
    response = await client.get("/iam/v2beta1/groups")
    assert response.status == 500
    parsed = aip193.parse(await response.read())
    assert parsed is not None
    assert parsed[0] == aip193.Code.INTERNAL
    assert "Internal error: GET /iam/v2beta1/groups" in parsed[1]
