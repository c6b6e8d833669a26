"""The --render suite: loopback servers the real clients talk to (a file and git server, a package
index, an npm registry, a Maven repository, a Go module proxy, a Cargo sparse registry, and the
helpers' registry stand-in), each letting in only ``_token`` with a live token of the fake token
service, and the user's own content that each rendered file starts with.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import tarfile
import time
import zipfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.testing import FakeTokenService, ThreadedServer

from .helpers import TokenCheck, tiny_wheel

AUDIENCE = "loopback.test"  # every loopback server's: netrc names machines without their port
HELLO = b"hello through the netrc\n"


@dataclass
class LiveCheck(TokenCheck):
    """A TokenCheck that also refuses an expired token, and reads Bearer and bare tokens (npm, cargo)."""

    def token_ok(self, token: str) -> bool:
        exp = (unverified_claims(token) or {}).get("exp")
        if not (isinstance(exp, int | float) and exp > time.time()):
            self.refused += 1
            return False
        return super().token_ok(token)

    def header_ok(self, header: str, scheme: str) -> bool:
        """``Bearer TOKEN`` (scheme ``bearer``) or the bare token (scheme ``""``)."""
        given, _, value = header.partition(" ")
        if scheme:
            return given.lower() == scheme and self.token_ok(value)
        return self.token_ok(header)


def _unauthorized(realm: str) -> web.Response:
    return web.Response(status=401, headers={"WWW-Authenticate": f'Basic realm="{realm}"'})


def bare_repository(directory: Path) -> Path:
    """A bare git repository served over git's dumb HTTP protocol (static files), one commit on main."""
    work, bare = directory / "work", directory / "repo.git"
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(directory),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.test",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.test",
        "PATH": "/usr/bin:/bin",
    }
    for argv in (
        ["git", "init", "-q", "-b", "main", str(work)],
        ["git", "-C", str(work), "commit", "-q", "--allow-empty", "-m", "first"],
        ["git", "clone", "-q", "--bare", str(work), str(bare)],
        ["git", "-C", str(bare), "update-server-info"],
    ):
        subprocess.run(argv, env=env, check=True, capture_output=True)
    return bare


def files_app(check: LiveCheck, repository: Path) -> web.Application:
    """What the netrc clients fetch, all behind Basic ``_token``: ``/hello.txt`` (curl, wget), a git
    repository over git's dumb HTTP protocol (git clone) and a PEP 503 index (pip download)."""
    wheel_name, wheel = tiny_wheel()
    sha = hashlib.sha256(wheel).hexdigest()

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not check.basic_ok(request.headers.get("Authorization", "")):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="files"'})
        return await handler(request)

    async def hello(request: web.Request) -> web.Response:
        return web.Response(body=HELLO, content_type="text/plain")

    async def git_file(request: web.Request) -> web.StreamResponse:
        path = (repository / request.match_info["path"]).resolve()
        if not path.is_relative_to(repository) or not path.is_file():
            return web.Response(status=404)
        return web.Response(body=path.read_bytes(), content_type="application/octet-stream")

    async def project(request: web.Request) -> web.Response:
        link = f'<a href="/files/{wheel_name}#sha256={sha}">{wheel_name}</a>'
        return web.Response(text=f"<!DOCTYPE html><html><body>{link}</body></html>", content_type="text/html")

    async def file(request: web.Request) -> web.Response:
        return web.Response(body=wheel, content_type="application/octet-stream")

    app = web.Application(middlewares=[guard])
    app.router.add_get("/hello.txt", hello)
    app.router.add_get("/repo.git/{path:.+}", git_file)
    app.router.add_get("/simple/tinypkg/", project)
    app.router.add_get(f"/files/{wheel_name}", file)
    return app


def _tgz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def npm_app(check: LiveCheck) -> web.Application:
    """The npm registry API for one package, ``tinypkg@1.0.0``, behind ``Bearer`` (npm's _authToken)."""
    tarball = _tgz({"package/package.json": b'{"name": "tinypkg", "version": "1.0.0"}\n'})
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()

    async def packument(request: web.Request) -> web.Response:
        if not check.header_ok(request.headers.get("Authorization", ""), "bearer"):
            return web.json_response({"error": "authentication required"}, status=401)
        url = f"http://{request.host}/tinypkg/-/tinypkg-1.0.0.tgz"
        dist = {"tarball": url, "shasum": hashlib.sha1(tarball).hexdigest(), "integrity": integrity}  # noqa: S324
        version = {"name": "tinypkg", "version": "1.0.0", "dist": dist}
        return web.json_response(
            {"name": "tinypkg", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": version}}
        )

    async def download(request: web.Request) -> web.Response:
        if not check.header_ok(request.headers.get("Authorization", ""), "bearer"):
            return web.json_response({"error": "authentication required"}, status=401)
        return web.Response(body=tarball, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/tinypkg", packument)
    app.router.add_get("/tinypkg/-/tinypkg-1.0.0.tgz", download)
    return app


PARENT_POM = (
    b'<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
    b"<groupId>com.example</groupId><artifactId>parent</artifactId><version>1.0</version>"
    b"<packaging>pom</packaging></project>\n"
)
CHILD_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<parent><groupId>com.example</groupId><artifactId>parent</artifactId><version>1.0</version>
<relativePath/></parent><artifactId>app</artifactId><packaging>pom</packaging></project>
"""


def maven_app(check: LiveCheck) -> web.Application:
    """A Maven repository holding one parent POM, behind Basic ``_token``. A project whose parent
    it is makes maven's core resolve it from here before any plugin runs (none is on this machine)."""
    path = "/maven2/com/example/parent/1.0/parent-1.0.pom"
    files = {path: PARENT_POM, path + ".sha1": hashlib.sha1(PARENT_POM).hexdigest().encode()}  # noqa: S324

    async def artifact(request: web.Request) -> web.Response:
        if not check.basic_ok(request.headers.get("Authorization", "")):
            return _unauthorized("maven")
        body = files.get(request.path)
        return web.Response(status=404) if body is None else web.Response(body=body)

    app = web.Application()
    app.router.add_get("/maven2/{path:.+}", artifact)
    return app


GO_MODULE = "example.test/tiny"


def goproxy_app(check: LiveCheck) -> web.Application:
    """A GOPROXY serving ``example.test/tiny@v1.0.0``, behind Basic ``_token`` (serve it over HTTPS:
    go sends GOAUTH's headers on HTTPS requests only)."""
    mod = f"module {GO_MODULE}\n".encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{GO_MODULE}@v1.0.0/go.mod", mod)
        archive.writestr(f"{GO_MODULE}@v1.0.0/tiny.go", b"package tiny\n")
    files = {
        "list": b"v1.0.0\n",
        "v1.0.0.info": b'{"Version": "v1.0.0", "Time": "2026-01-01T00:00:00Z"}',
        "v1.0.0.mod": mod,
        "v1.0.0.zip": buffer.getvalue(),
    }

    async def module(request: web.Request) -> web.Response:
        if not check.basic_ok(request.headers.get("Authorization", "")):
            return _unauthorized("goproxy")
        body = files.get(request.match_info["file"])
        return web.Response(status=404) if body is None else web.Response(body=body)

    app = web.Application()
    app.router.add_get(f"/{GO_MODULE}/@v/{{file}}", module)
    return app


def cargo_app(check: LiveCheck) -> web.Application:
    """A Cargo sparse registry with ``auth-required`` holding the crate ``tiny 1.0.0``; cargo sends
    the token as the bare ``Authorization`` value."""
    crate = _tgz(
        {
            "tiny-1.0.0/Cargo.toml": b'[package]\nname = "tiny"\nversion = "1.0.0"\nedition = "2021"\n',
            "tiny-1.0.0/src/lib.rs": b"",
        }
    )
    entry = {
        "name": "tiny",
        "vers": "1.0.0",
        "deps": [],
        "cksum": hashlib.sha256(crate).hexdigest(),
        "features": {},
        "yanked": False,
    }

    def refused(request: web.Request) -> web.Response | None:
        if check.header_ok(request.headers.get("Authorization", ""), ""):
            return None
        return web.json_response({"errors": [{"detail": "authentication required"}]}, status=401)

    async def config(request: web.Request) -> web.Response:
        if (answer := refused(request)) is not None:
            return answer
        base = f"http://{request.host}"
        return web.json_response({"dl": f"{base}/dl", "api": base, "auth-required": True})

    async def index(request: web.Request) -> web.Response:
        if (answer := refused(request)) is not None:
            return answer
        return web.Response(text=json.dumps(entry) + "\n")

    async def download(request: web.Request) -> web.Response:
        if (answer := refused(request)) is not None:
            return answer
        return web.Response(body=crate, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/index/config.json", config)
    app.router.add_get("/index/ti/ny/tiny", index)
    app.router.add_get("/dl/tiny/1.0.0/download", download)
    return app


@dataclass
class UserFiles:
    """What each rendered file held before tokenrelay: the user's own, which must survive byte for byte."""

    netrc: str = "# my machines\nmachine example.org login me password mine\n"
    npmrc: str = "; my npm settings\nfund=false\n//registry.example.org/:_authToken=mine\n"
    docker: str = (
        '{\n  "auths": {\n    "example.org": {"auth": "bWU6bWluZQ=="}\n  },\n  "psFormat": "table"\n}\n'
    )
    maven: str = ""  # needs the repository's address: see maven_settings
    template: str = (
        "# curl config for ${host} (${audience}), token valid until ${expires_at}\n"
        'header = "Authorization: Bearer ${token}"\n'
        "# $HOME and ${other} stay as they are\n"
    )


def docker_config(registry: str) -> str:
    """A user's config.json with an entry of their own for ``registry`` (which tokenrelay renders)."""
    return UserFiles().docker.replace(
        '"example.org"', f'"{registry}": {{"auth": "bWU6bXktb3duLXBhc3N3b3Jk"}},\n    "example.org"'
    )


def maven_settings(mirror: str) -> str:
    """A user's settings.xml: their own servers, a comment, and a mirror of everything onto ``mirror``
    under the id --render-maven-ids gives the loopback repository, for which the user keeps a
    ``<server>`` of their own too (whose password the server refuses: tokenrelay's must win)."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <!-- everything through the company mirror -->
  <mirrors>
    <mirror>
      <id>loopback-repo</id>
      <mirrorOf>*</mirrorOf>
      <url>{mirror}</url>
    </mirror>
  </mirrors>
  <servers>
    <server>
      <id>loopback-repo</id>
      <username>me</username>
      <password>my-own-password</password>
    </server>
    <server>
      <id>corp</id>
      <username>me</username>
      <password>mine</password>
    </server>
  </servers>
</settings>
"""


@dataclass
class RenderStack:
    """The servers, a running ``tokenrelay run`` rendering into ``home``, and the files' first texts."""

    service: FakeTokenService
    check: LiveCheck
    servers: dict[str, ThreadedServer]
    home: Path
    socket: str
    sidecar: subprocess.Popen[bytes]
    token_url: str = ""
    original: dict[str, str] = field(default_factory=dict)  # path -> the user's text
    paths: dict[str, Path] = field(default_factory=dict)  # format name -> rendered file

    @property
    def hosts(self) -> str:
        return ",".join(f"{server.netloc}={AUDIENCE}" for server in self.servers.values())

    def wait_for_new_token(self, read: Callable[[], str | None], old: str | None) -> str:
        """Until ``read()`` gives a token other than ``old`` (the sidecar refreshed); that token."""
        from .waiting import eventually_blocking

        seen: list[str] = []

        def changed() -> bool:
            token = read()
            if token is not None and token != old:
                seen.append(token)
                return True
            return False

        eventually_blocking(changed, "the rendered file to hold a new token", timeout=30)
        return seen[0]
