"""A real git smart-HTTP server on loopback: ``git http-backend`` (CGI) behind a Basic ``_token``
check, serving one bare repository with one commit. For clones and fetches through the helper."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from aiohttp import web

from .helpers import TokenCheck

CONTENT = "hello from the loopback git server\n"


def bare_repository(root: Path, git: str) -> Path:
    """``root/demo.git``, a bare repository whose ``main`` holds README with CONTENT."""
    work, bare = root / "work", root / "demo.git"
    env = {
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.test",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.test",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root),
        "PATH": "/usr/bin:/bin",
    }
    for argv in (
        [git, "init", "-q", "--bare", "-b", "main", str(bare)],
        [git, "init", "-q", "-b", "main", str(work)],
    ):
        subprocess.run(argv, env=env, check=True)
    (work / "README").write_text(CONTENT)
    for argv in (
        [git, "-C", str(work), "add", "README"],
        [git, "-C", str(work), "commit", "-q", "-m", "first"],
        [git, "-C", str(work), "push", "-q", str(bare), "main"],
    ):
        subprocess.run(argv, env=env, check=True)
    return bare


def git_backend_app(check: TokenCheck, root: Path, git: str) -> web.Application:
    """Every request under /demo.git/ goes to ``git http-backend`` once Basic ``_token:<token>`` passes."""

    async def cgi(request: web.Request) -> web.StreamResponse:
        if not check.basic_ok(request.headers.get("Authorization", "")):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="git"'})
        body = await request.read()
        env = {
            "GIT_PROJECT_ROOT": str(root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": request.path,
            "QUERY_STRING": request.query_string,
            "REQUEST_METHOD": request.method,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": request.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
            "REMOTE_USER": "_token",
            "REMOTE_ADDR": "127.0.0.1",
            "PATH": "/usr/bin:/bin",
        }
        process = await asyncio.create_subprocess_exec(
            git, "http-backend", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
        )
        out, _ = await process.communicate(body)
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, {}
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers[name.strip()] = value.strip()
        return web.Response(status=status, body=payload, headers=headers)

    app = web.Application()
    app.router.add_route("*", "/demo.git/{tail:.*}", cgi)
    return app
