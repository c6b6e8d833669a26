"""``tokenrelay dev``: the emulator, a sidecar wired to it and the proxy, in one process.

What it sets up: the emulator on a free loopback port; an organization ``dev`` with a few groups and
repos; an identity bound as ``owner`` of it whose ``claimMatch`` is the emulator's issuer and the
subject ``system:serviceaccount:dev:tokenrelay``; a platform token file in a temporary directory,
rotated like kubelet's; then the sidecar (``daemon.serve``) with its socket in that directory and
the proxy on 127.0.0.1:8080. Everything it prints goes to stdout, one ``name: value`` per line,
ending with ``ready``; SIGINT/SIGTERM stop it all and remove the temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..lite.netloc import is_loopback, parse_hostport
from ..options import add_logging_options
from ..serving.listening import bind_error
from ..serving.socketdir import private_directory
from ..sidecar.settings import Settings
from . import commandpaths
from .commandpaths import installed, scripts_dir, sh
from .iam import groups

if TYPE_CHECKING:
    from . import Emulator

SUBJECT = "system:serviceaccount:dev:tokenrelay"
PLATFORM_TOKEN_LIFETIME = 600.0  # rotated at 80%, as kubelet does: every 8 minutes
DEFAULT_PROXY = "127.0.0.1:8080"


def _hostport(text: str) -> tuple[str, int]:
    try:
        host, port = parse_hostport(text, DEFAULT_PROXY)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not is_loopback(host):
        raise argparse.ArgumentTypeError(f"{host} is not a loopback address; tokenrelay dev stays local")
    return host, port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--proxy-listen",
        type=_hostport,
        default=DEFAULT_PROXY,
        metavar="HOST:PORT",
        help=f"where the proxy listens (port 0 picks a free one). Default: {DEFAULT_PROXY}",
    )
    parser.add_argument(
        "--emulator-listen",
        type=_hostport,
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="where the emulator listens. Default: a free loopback port",
    )
    parser.add_argument(
        "--token-lifetime",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="lifetime of the API tokens the emulator issues. Default: 3600",
    )
    add_logging_options(parser, ["log_level"])  # dev's lines are text: no --log-format


def run(args: argparse.Namespace) -> int:
    from ..serving.startup import run_service

    return run_service("dev", lambda: main(args), log_level=args.log_level, interrupted=130)


def free_port(host: str) -> int:
    """A port that was free a moment ago (for ``--proxy-listen HOST:0``, so we can print it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def say(name: str, value: str = "") -> None:
    print(f"{name}: {value}" if value else name, flush=True)


async def main(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    from ..sidecar import daemon
    from . import Emulator, EmulatorServer, RotatingTokenFile

    proxy_host, proxy_port = args.proxy_listen
    if proxy_port == 0:
        proxy_port = free_port(proxy_host)
    emulator = Emulator(token_lifetime=args.token_lifetime)
    server = EmulatorServer(emulator, *args.emulator_listen)
    workdir = private_directory("tokenrelay-dev-")
    token_file: RotatingTokenFile | None = None
    watcher: asyncio.Task[None] | None = None
    try:
        try:
            await server.start()
        except OSError as exc:
            raise bind_error(exc, "--emulator-listen", *args.emulator_listen) from None
        url = server.url
        org = emulator.organization("dev", "made by tokenrelay dev")
        for name, repos in (("team-a", ["web", "worker"]), ("team-b", ["api"])):
            group = groups.create(emulator.resources, org.uid, {"name": name})
            for repo in repos:
                emulator.repo(group.uid, repo)
        workload = emulator.workload(org.uid, SUBJECT, role="owner", name="tokenrelay dev")
        image = seed_image(emulator, org.uid)

        async def mint() -> str:
            return emulator.mint(SUBJECT, url, PLATFORM_TOKEN_LIFETIME)

        token_file = RotatingTokenFile(workdir / "oidc", mint)
        await token_file.start()
        settings = Settings(
            auth_url=url,
            api_url=url,
            identity=workload.identity.uid,
            id_token_file=str(token_file.path),
            socket=str(workdir / "tokenrelay.sock"),
            proxy_listen=(proxy_host, proxy_port),
        )
        proxy = f"http://{proxy_host}:{proxy_port}"
        host = url.removeprefix("http://")
        docker_config = write_docker_config(workdir / "docker", host)
        scripts = scripts_dir()
        tokenrelay = commandpaths.tokenrelay(scripts)
        grpcurl = commandpaths.grpcurl(scripts)
        helper = (
            installed("docker-credential-tokenrelay", scripts) or scripts / "docker-credential-tokenrelay"
        )
        sidecar = f"TOKENRELAY_SOCKET={sh(settings.socket)}"
        hosts = f"TOKENRELAY_HOSTS={host}={url}"
        # Announced only once everything listens: a port already taken fails before any line.
        lines = [
            ("emulator", url),
            ("api_url", url),
            ("auth_url", url),
            ("organization", org.uid),
            ("identity", workload.identity.uid),
            ("subject", SUBJECT),
            ("id_token_file", settings.id_token_file),
            ("socket", settings.socket),
            ("proxy", proxy),
            # Each line works as printed in a fresh shell, the venv's bin/ not on PATH: commands by
            # their absolute path; podman looks its credential helper up on PATH, so the line sets it.
            ("try", f"curl {proxy}/iam/v2beta1/groups"),
            # gRPC through the same proxy port (server reflection: no proto files needed)
            (
                "try",
                f"{grpcurl} -plaintext {proxy_host}:{proxy_port} iam.v2beta1.Groups/ListGroups",
            ),
            ("try", f"{sidecar} {tokenrelay} token"),
            ("try", f"echo {host} | {sidecar} {hosts} {sh(helper)} get"),
            (
                "try",
                f"PATH={sh(helper.parent)}:$PATH DOCKER_CONFIG={sh(docker_config)} {sidecar} {hosts} "
                f"podman pull --tls-verify=false {host}/{org.name}/{image}",
            ),
            ("ready", "Ctrl-C to stop"),
        ]
        started = asyncio.Event()
        watcher = asyncio.create_task(_announce(started, lines))
        return await daemon.serve(settings, stop=stop, listening=started, proxy_setting="--proxy-listen")
    finally:
        announced = watcher is not None and watcher.done() and not watcher.cancelled()
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if token_file is not None:
            await token_file.stop()
        await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        if announced:
            print("stopped", flush=True, file=sys.stdout)


def seed_image(emulator: Emulator, org_uid: str) -> str:
    """A small image in the organization's root group, so a pull works at once: ``hello:latest``."""
    from .registry import tiny_image

    repo = emulator.repo(org_uid, "hello")
    files = {"hello.txt": b"hello from tokenrelay dev\n"}
    emulator.registry.push(repo, "latest", tiny_image(files, cmd=["cat", "/hello.txt"]))
    return "hello:latest"


def write_docker_config(directory: Path, host: str) -> Path:
    """A ``DOCKER_CONFIG`` directory whose config.json sends ``host`` to docker-credential-tokenrelay."""
    directory.mkdir(mode=0o700)
    (directory / "config.json").write_text(json.dumps({"credHelpers": {host: "tokenrelay"}}, indent=2) + "\n")
    return directory


async def _announce(started: asyncio.Event, lines: list[tuple[str, str]]) -> None:
    await started.wait()
    for name, value in lines:
        say(name, value)
