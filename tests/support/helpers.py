"""The credential helpers' suite: threaded loopback servers (git, registry, package index), the
session-wide sidecar stack, and the installed scripts.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.lite.redact import fingerprint
from tokenrelay.lite.socketclient import fetch_token
from tokenrelay.testing import FakeTokenService, ThreadedServer, make_jwt

BIN = Path(sys.executable).parent


IDENTITY = "org/identities/builder"


def require(tool: str) -> str:
    """The tool's path; skips when it is missing, unless CI is set (then the test fails)."""
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is not installed, and CI is set: .ci/run installs it")
        pytest.skip(f"{tool} is not installed")
    return path


def script(name: str) -> str:
    """An installed console script of this project."""
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed: pip install -e . first")
        return found
    return str(path)


@dataclass
class TokenCheck:
    """Accepts Basic ``_token:<token>`` where the token was issued by the fake service for ``audience``."""

    service: FakeTokenService
    audience: str = ""
    accepted: list[str] = field(default_factory=list)  # fingerprints of the tokens let in
    refused: int = 0

    def basic_ok(self, header: str) -> bool:
        """``Basic`` with the user ``_token`` and a token that ``token_ok`` lets in."""
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            self.refused += 1
            return False
        try:
            user, _, token = base64.b64decode(value).decode().partition(":")
        except ValueError:
            self.refused += 1
            return False
        if user != "_token":
            self.refused += 1
            return False
        return self.token_ok(token)

    def token_ok(self, token: str) -> bool:
        """A token the fake service issued for ``audience``."""
        claims = unverified_claims(token) or {}
        if token not in self.service.issued or claims.get("aud") != self.audience:
            self.refused += 1
            return False
        self.accepted.append(fingerprint(token))
        return True


GIT_SHA = "1" * 40


def _pkt(line: str) -> bytes:
    data = line.encode()
    return f"{len(data) + 4:04x}".encode() + data


def git_app(check: TokenCheck) -> web.Application:
    """Smart-HTTP ``info/refs`` for one repository, behind Basic ``_token:<token>``."""

    async def info_refs(request: web.Request) -> web.Response:
        if not check.basic_ok(request.headers.get("Authorization", "")):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="git"'})
        if request.query.get("service") != "git-upload-pack":
            return web.Response(status=403)
        body = (
            _pkt("# service=git-upload-pack\n")
            + b"0000"
            + _pkt(f"{GIT_SHA} HEAD\0symref=HEAD:refs/heads/main agent=fake/1\n")
            + _pkt(f"{GIT_SHA} refs/heads/main\n")
            + b"0000"
        )
        return web.Response(body=body, content_type="application/x-git-upload-pack-advertisement")

    app = web.Application()
    app.router.add_get("/demo.git/info/refs", info_refs)
    return app


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


REGISTRY_CONFIG = json.dumps(
    {"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": []}}
).encode()


REGISTRY_MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": len(REGISTRY_CONFIG),
            "digest": _digest(REGISTRY_CONFIG),
        },
        "layers": [],
    }
).encode()


def registry_app(check: TokenCheck) -> web.Application:
    """A registry stand-in speaking the Docker token flow: the realm takes Basic ``_token:<token>``."""
    issued: set[str] = set()

    def challenge(request: web.Request) -> web.Response:
        realm = f"http://{request.host}/token"
        header = f'Bearer realm="{realm}",service="{request.host}"'
        if request.path != "/v2/":
            header += ',scope="repository:demo/app:pull"'
        return web.json_response(
            {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]},
            status=401,
            headers={"WWW-Authenticate": header, "Docker-Distribution-API-Version": "registry/2.0"},
        )

    def authorized(request: web.Request) -> bool:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and value in issued

    async def token(request: web.Request) -> web.Response:
        if not check.basic_ok(request.headers.get("Authorization", "")):
            return web.json_response({"errors": [{"code": "UNAUTHORIZED"}]}, status=401)
        value = f"registry-{len(issued) + 1}"
        issued.add(value)
        return web.json_response({"token": value, "access_token": value, "expires_in": 300})

    async def v2(request: web.Request) -> web.Response:
        if not authorized(request):
            return challenge(request)
        return web.json_response({}, headers={"Docker-Distribution-API-Version": "registry/2.0"})

    async def manifest(request: web.Request) -> web.Response:
        if not authorized(request):
            return challenge(request)
        return web.Response(
            body=REGISTRY_MANIFEST,
            headers={
                "Content-Type": "application/vnd.docker.distribution.manifest.v2+json",
                "Docker-Content-Digest": _digest(REGISTRY_MANIFEST),
            },
        )

    async def blob(request: web.Request) -> web.Response:
        if not authorized(request):
            return challenge(request)
        if request.match_info["digest"] != _digest(REGISTRY_CONFIG):
            return web.Response(status=404)
        return web.Response(body=REGISTRY_CONFIG, content_type="application/octet-stream")

    async def tags(request: web.Request) -> web.Response:
        if not authorized(request):
            return challenge(request)
        return web.json_response({"name": "demo/app", "tags": ["v1"]})

    app = web.Application()
    app.router.add_get("/v2/", v2)
    app.router.add_get("/token", token)
    app.router.add_route("*", "/v2/demo/app/manifests/{ref}", manifest)
    app.router.add_get("/v2/demo/app/blobs/{digest}", blob)
    app.router.add_get("/v2/demo/app/tags/list", tags)
    return app


def tiny_wheel() -> tuple[str, bytes]:
    """A minimal pure-Python wheel: its file name and bytes."""
    name = "tinypkg-1.0-py3-none-any.whl"
    files = {
        "tinypkg/__init__.py": b"",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}\n"
        for path, data in files.items()
    )
    files["tinypkg-1.0.dist-info/RECORD"] = (record + "tinypkg-1.0.dist-info/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return name, buffer.getvalue()


def index_app(check: TokenCheck) -> web.Application:
    """A PEP 503 simple index with one wheel, every page behind Basic ``_token:<token>``."""
    wheel_name, wheel = tiny_wheel()
    sha = hashlib.sha256(wheel).hexdigest()

    def guard(request: web.Request) -> web.Response | None:
        if check.basic_ok(request.headers.get("Authorization", "")):
            return None
        return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="index"'})

    async def project(request: web.Request) -> web.Response:
        if (refused := guard(request)) is not None:
            return refused
        link = f'<a href="/files/{wheel_name}#sha256={sha}">{wheel_name}</a>'
        return web.Response(text=f"<!DOCTYPE html><html><body>{link}</body></html>", content_type="text/html")

    async def file(request: web.Request) -> web.Response:
        if (refused := guard(request)) is not None:
            return refused
        return web.Response(body=wheel, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/simple/tinypkg/", project)
    app.router.add_get(f"/files/{wheel_name}", file)
    return app


@dataclass
class Stack:
    """The fake token service, the loopback servers and a running sidecar."""

    service: FakeTokenService
    token_server: ThreadedServer
    git: ThreadedServer
    git_check: TokenCheck
    registry: ThreadedServer
    registry_check: TokenCheck
    index: ThreadedServer
    index_check: TokenCheck
    socket: str
    sidecar: subprocess.Popen[bytes]

    @property
    def hosts(self) -> str:
        return ",".join((self.git.netloc, self.registry.netloc, self.index.netloc))

    def current(self, audience: str) -> str:
        """Fingerprint of the sidecar's current token for ``audience``."""
        return fingerprint(fetch_token(self.socket, audience).token)


def docker_config(env: dict[str, str], hosts: dict[str, str]) -> Path:
    """Write ``credHelpers`` into the client's docker config.json."""
    path = Path(env["DOCKER_CONFIG"]) / "config.json"
    path.write_text(json.dumps({"credHelpers": hosts}))
    return path


def run(
    argv: list[str], env: dict[str, str], stdin: str = "", timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, input=stdin, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def jwt_for(audience: str, **extra: Any) -> str:
    """A token shaped like the service's, for pure-function tests."""
    now = int(time.time())
    return make_jwt({"jti": "t-test", "aud": audience, "iat": now, "exp": now + 3600, **extra})
