"""Reading the platform's OIDC token: afresh every time, and refused when unusable."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenrelay.errors import IdTokenError
from tokenrelay.testing import make_jwt
from tokenrelay.tokens.idsources import EnvSource, FileSource, GitHubActionsSource, explained


def _jwt(exp_in: float, sub: str = "system:serviceaccount:ns:app") -> str:
    now = time.time()
    return make_jwt({"sub": sub, "iat": now, "exp": now + exp_in})


def _kubelet_write(directory: Path, token: str, generation: int) -> None:
    """Write the token the way kubelet's AtomicWriter does: a new ..data symlink swapped in."""
    data = directory / f"..2026_{generation}"
    data.mkdir()
    (data / "token").write_text(token)
    link = directory / "..data_tmp"
    link.symlink_to(data.name)
    link.rename(directory / "..data")
    if not (directory / "token").is_symlink():
        (directory / "token").symlink_to("..data/token")


async def test_rotated_file_is_reread_at_every_exchange(tmp_path: Path) -> None:
    """After kubelet swaps the ..data symlink, the next read returns the new token."""
    first, second = _jwt(600, "first"), _jwt(600, "second")
    _kubelet_write(tmp_path, first, 1)
    source = FileSource(str(tmp_path / "token"))
    assert (await source.read()).value == first
    _kubelet_write(tmp_path, second, 2)
    assert (await source.read()).value == second


async def test_missing_file_names_the_flag(tmp_path: Path) -> None:
    """A missing token file says where it looked and, as the user reads it, which flag to change."""
    source = FileSource(str(tmp_path / "absent"))
    with pytest.raises(IdTokenError) as caught:
        await source.read()
    assert caught.value.message == f"no OIDC token file at {tmp_path / 'absent'}"
    assert explained(source, caught.value).message == (
        f"no OIDC token file at {tmp_path / 'absent'}; {source.fix()}"
    )
    assert "point --id-token-file (env TOKENRELAY_ID_TOKEN_FILE) at the token file" in source.fix()


async def test_empty_file_is_refused(tmp_path: Path) -> None:
    """An empty token file (kubelet mid-write, a broken mount) is an error, not an empty bearer."""
    (tmp_path / "token").write_text("\n")
    with pytest.raises(IdTokenError, match="is empty"):
        await FileSource(str(tmp_path / "token")).read()


async def test_expired_jwt_is_refused_before_any_request(tmp_path: Path) -> None:
    """An OIDC token whose exp has passed is reported as expired, with when."""
    (tmp_path / "token").write_text(_jwt(-30))
    with pytest.raises(IdTokenError, match="expired at 20"):
        await FileSource(str(tmp_path / "token")).read()


async def test_directory_instead_of_file_is_explained(tmp_path: Path) -> None:
    """Pointing at the volume directory instead of the file says so; the fix names the file itself."""
    source = FileSource(str(tmp_path))
    with pytest.raises(IdTokenError, match="is a directory") as caught:
        await source.read()
    assert explained(source, caught.value).message.endswith(
        "or point --id-token-file (env TOKENRELAY_ID_TOKEN_FILE) at the token file itself"
    )


async def test_error_messages_never_contain_the_token(tmp_path: Path) -> None:
    """Even the expired-token error names the file, not the token."""
    token = _jwt(-30)
    (tmp_path / "token").write_text(token)
    with pytest.raises(IdTokenError) as caught:
        await FileSource(str(tmp_path / "token")).read()
    assert token not in str(caught.value) and token.split(".")[1] not in str(caught.value)


async def test_env_source_reads_the_named_variable() -> None:
    """--id-token-env reads the variable at every exchange and explains when it is unset."""
    environ = {"CI_JOB_JWT": _jwt(600)}
    source = EnvSource("CI_JOB_JWT", environ)
    assert (await source.read()).value == environ["CI_JOB_JWT"]
    del environ["CI_JOB_JWT"]
    with pytest.raises(IdTokenError, match="CI_JOB_JWT.*is not set"):
        await source.read()


async def test_github_actions_source_asks_for_the_audience(aiohttp_server: object) -> None:
    """GitHub's endpoint is called with the request token and the audience; its value is used."""
    seen: dict[str, str] = {}
    issued = _jwt(300, "repo:org/app:ref:refs/heads/main")

    async def endpoint(request: web.Request) -> web.Response:
        seen["auth"] = request.headers["Authorization"]
        seen["audience"] = request.query["audience"]
        return web.json_response({"value": issued})

    app = web.Application()
    app.router.add_get("/token", endpoint)
    server: TestServer = await aiohttp_server(app)  # type: ignore[operator]
    async with aiohttp.ClientSession() as session:
        source = GitHubActionsSource(
            session,
            str(server.make_url("/token?api-version=2.0")),
            "gh-request-token",
            "https://auth.example.test",
        )
        assert (await source.read()).value == issued
    assert seen == {"auth": "bearer gh-request-token", "audience": "https://auth.example.test"}
    assert "gh-request-token" not in repr(source)


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
async def test_github_actions_answer_over_the_cap_is_refused(aiohttp_server: object, announced: bool) -> None:
    """A huge answer from GitHub's endpoint is refused at 128 KiB, announced or streamed, not read whole."""

    async def endpoint(request: web.Request) -> web.StreamResponse:
        filler = b'{"value": "' + b"a" * (200 * 1024) + b'"}'
        if announced:
            return web.Response(body=filler, content_type="application/json")
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(filler), 16 * 1024):
            await response.write(filler[start : start + 16 * 1024])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/token", endpoint)
    server: TestServer = await aiohttp_server(app)  # type: ignore[operator]
    async with aiohttp.ClientSession() as session:
        source = GitHubActionsSource(
            session, str(server.make_url("/token")), "t", "https://auth.example.test"
        )
        with pytest.raises(IdTokenError) as caught:
            await source.read()
    assert str(caught.value) == "GitHub Actions' OIDC endpoint answered over 128 KiB: not an OIDC token"
