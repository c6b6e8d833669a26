"""The relay's own requests take the proxy variables from the environment and no credential from a
file: a ``.netrc`` naming the token service's host, the relay's own ``--render netrc`` included,
never reaches the exchange."""

from __future__ import annotations

import random
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenrelay.sidecar import daemon
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import FakeClock, FakeTokenService, make_jwt

API = "https://api.example.test"
OIDC = {"OIDC": make_jwt({"sub": "ci", "exp": 4_000_000_000})}
NETRC = "machine 127.0.0.1 login me password from-a-file\ndefault login anyone password from-a-file\n"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")

Servers = Callable[..., Awaitable[TestServer]]


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def settings_for(auth_url: str, **extra: object) -> Settings:
    return Settings(
        auth_url=auth_url,
        api_url=API,
        identity="org/ci",
        id_token_source="env",
        id_token_env="OIDC",
        **extra,  # type: ignore[arg-type]
    )


async def test_a_netrc_rendered_for_the_token_services_host_survives_a_refresh(
    aiohttp_server: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --render netrc=$HOME/.netrc for a host on the token service's name, the refresh after the
    first render still exchanges: the relay never reads its own entry back as Basic credentials."""
    clock = FakeClock()
    service = FakeTokenService(wall=clock.wall, lifetime=600)
    server = await aiohttp_server(service.app())
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("NETRC", raising=False)
    host = f"127.0.0.1:{server.port}"
    settings = settings_for(
        str(server.make_url("")).rstrip("/"), hosts=(host,), render=(f"netrc={tmp_path}/.netrc",)
    )
    sidecar = daemon.build(
        settings, clock=clock, wall=clock.wall, sleep=clock.sleep, rng=random.Random(1), environ=OIDC
    )
    try:
        first = await sidecar.providers.get(host)
        assert "machine 127.0.0.1 login _token" in (tmp_path / ".netrc").read_text()
        clock.tick(601)
        second = await sidecar.providers.get(host)
    finally:
        await sidecar.session.close()
    assert second.value != first.value
    assert service.calls == 2


def counting_proxy(service: FakeTokenService, seen: list[str]) -> web.Application:
    """A forward proxy that answers as the token service itself, and notes each request's target
    and Proxy-Authorization (whether one came)."""

    @web.middleware
    async def note(
        request: web.Request, handler: Callable[..., Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        seen.append(f"{request.url.host} {'auth' if 'Proxy-Authorization' in request.headers else 'none'}")
        return await handler(request)

    app = service.app()
    app.middlewares.append(note)
    return app


@pytest.mark.parametrize(
    ("variable", "user", "expected"),
    [("http_proxy", "", "none"), ("HTTP_PROXY", "", "none"), ("HTTP_PROXY", "me:pw@", "auth")],
)
async def test_the_proxy_variables_still_route_the_exchange(
    aiohttp_server: Servers,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    variable: str,
    user: str,
    expected: str,
) -> None:
    """HTTP_PROXY (either case) carries the exchange to a token service only the proxy can reach,
    with the proxy's credentials from its URL; a .netrc entry for the proxy's host adds none."""
    seen: list[str] = []
    proxy = await aiohttp_server(counting_proxy(FakeTokenService(), seen))
    monkeypatch.setenv(variable, f"http://{user}{proxy.host}:{proxy.port}")
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login me password from-a-file\n")
    monkeypatch.setenv("NETRC", str(tmp_path / ".netrc"))
    sidecar = daemon.build(settings_for("http://tokens.invalid"), environ=OIDC)
    try:
        await sidecar.providers.get(API)
    finally:
        await sidecar.session.close()
    assert seen == [f"tokens.invalid {expected}"]


@pytest.mark.parametrize(("user", "expected"), [("", "none"), ("me:pw@", "auth")])
async def test_a_proxy_variable_without_a_scheme_is_an_http_proxy(
    aiohttp_server: Servers, monkeypatch: pytest.MonkeyPatch, user: str, expected: str
) -> None:
    """HTTP_PROXY=host:port with no http:// (as curl, pip and urllib take it) carries the exchange
    through that proxy, its credentials too, instead of every exchange failing with a ValueError."""
    seen: list[str] = []
    proxy = await aiohttp_server(counting_proxy(FakeTokenService(), seen))
    monkeypatch.setenv("HTTP_PROXY", f"{user}{proxy.host}:{proxy.port}")
    sidecar = daemon.build(settings_for("http://tokens.invalid"), environ=OIDC)
    try:
        await sidecar.providers.get(API)
    finally:
        await sidecar.session.close()
    assert seen == [f"tokens.invalid {expected}"]


async def test_no_proxy_sends_the_exchange_around_the_proxy(
    aiohttp_server: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host NO_PROXY names is asked directly, the proxy HTTP_PROXY names left out."""
    seen: list[str] = []
    proxy = await aiohttp_server(counting_proxy(FakeTokenService(), seen))
    direct = FakeTokenService()
    server = await aiohttp_server(direct.app())
    monkeypatch.setenv("HTTP_PROXY", f"http://{proxy.host}:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    sidecar = daemon.build(settings_for(str(server.make_url("")).rstrip("/")), environ=OIDC)
    try:
        await sidecar.providers.get(API)
    finally:
        await sidecar.session.close()
    assert (seen, direct.calls) == ([], 1)


def test_every_session_of_the_relays_own_requests_comes_from_outbound() -> None:
    """No module but outbound makes an aiohttp client session or sets trust_env (the emulator, which
    plays the platforms and is never the relay, aside): a new one would read ~/.netrc again."""
    package = Path(daemon.__file__).resolve().parents[1]
    makers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "outbound.py"
        and "emulator" not in path.relative_to(package).parts
        and ("ClientSession(" in path.read_text() or "trust_env" in path.read_text())
    )
    assert makers == []


async def test_the_node_agent_exchanges_beside_a_netrc_naming_the_token_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tokenrelay agent, with NETRC naming a file with an entry for the token service's host (and a
    default one), hands a pod its token: no Basic credentials join the exchange's bearer."""
    from ..support.agent import Pod, start_rig
    from ..support.paths import short_dir

    (tmp_path / "netrc").write_text(NETRC)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    directory = short_dir()
    rig, cleanups = await start_rig(directory)
    try:
        answer = await rig.ask(rig.start_pod(Pod("web-1", "builder")))
    finally:
        for cleanup in cleanups:
            await cleanup()
        shutil.rmtree(directory, ignore_errors=True)
    assert answer.status == 200, answer.body
    assert answer.token in rig.service.issued
