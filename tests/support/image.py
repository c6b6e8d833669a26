"""The container image as it ships: built from the project's Dockerfile once per test session.

No registry image can be pulled here, so the base comes from Debian packages (``mmdebstrap``, imported
as ``PYTHON_IMAGE``, and the same with binutils as ``BUILDER_IMAGE``, each cached between sessions);
the build runs on a private ``dockerd`` (its own data
root, exec root and socket) with no network at all, the Dockerfile's offline way: every wheel is in the
context's ``wheelhouse/``, made beforehand by this virtualenv's pip. ``reaper`` makes sure engines and
nodes stop even when the test session is killed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .paths import short_dir

REPO = Path(__file__).resolve().parents[2]
TAG = "tokenrelay:test"
# The extras image: the Dockerfile's EXTRAS build argument, the OIDC sources that need an extra.
EXTRAS = "aws,spiffe"
EXTRAS_TAG = "tokenrelay:test-extras"
BASE_TAG = "local/python:3.11-bookworm"
BUILDER_TAG = "local/python:3.11-bookworm-binutils"  # the stand-in for python:3.12-bookworm, the builder
TOKENRELAY = str(Path(sys.executable).parent / "tokenrelay")
# The stand-in for python:3.12-slim-bookworm: Debian's Python with no documentation, locales or apt
# (the essential variant), merged /usr done by mmdebstrap's hook rather than by the usrmerge package
# (which would pull in perl).
MMDEBSTRAP = [
    "mmdebstrap",
    "--quiet",
    "--variant=essential",
    # libstdc++6: the slim image has it (apt needs it), and grpcio (EXTRAS=spiffe) links it
    "--include=python3,python3-venv,python-is-python3,ca-certificates,libstdc++6",  # BUILDER adds binutils
    '--aptopt=Apt::Install-Recommends "false"',
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/*",
    "bookworm",
]
# The builder's: the same Python, with binutils for the Dockerfile's strip.
BUILDER = [
    *(
        arg.replace("ca-certificates", "ca-certificates,binutils") if arg.startswith("--include=") else arg
        for arg in MMDEBSTRAP
    )
]
# A base without Python: a runtime stage whose Python the builder's virtualenv cannot run on.
NO_PYTHON = [*("--include=ca-certificates" if arg.startswith("--include=") else arg for arg in MMDEBSTRAP)]
# What .dockerignore lets through, and so what the build context needs.
CONTEXT = ["Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "src", "scripts"]


def need(*tools: str) -> None:
    """Skip (fail under CI, where .ci/run installs them) unless root and every tool are here."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    reason = f"needs {', '.join(missing)} (.ci/run installs them)" if missing else ""
    if os.geteuid() != 0:
        reason = "needs root (a private dockerd and a kubelet)"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI is set")
        pytest.skip(reason)


def reaper(command: str) -> subprocess.Popen[bytes]:
    """A watcher that runs ``command`` once this test process is gone, however it ended (a finalizer
    does not run on SIGKILL or SIGTERM); kill it when the finalizer has cleaned up."""
    watch = f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; {command}"
    return subprocess.Popen(
        ["sh", "-c", watch],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_reaper(watcher: subprocess.Popen[bytes]) -> None:
    watcher.kill()
    watcher.wait()


@dataclass
class Engine:
    """A private dockerd: its own socket, data root and exec root, stopped by its pid."""

    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": f"unix://{self.directory}/docker.sock", "DOCKER_BUILDKIT": "0"}

    def docker(
        self, *args: str, timeout: float = 300, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["docker", *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)}: {result.returncode}\n{result.stderr[-3000:]}")
        return result

    def start(self) -> None:
        log = (self.directory / "dockerd.log").open("wb")
        self.process = subprocess.Popen(
            [
                "dockerd",
                f"--host=unix://{self.directory}/docker.sock",
                f"--data-root={self.directory}/data",
                f"--exec-root={self.directory}/exec",
                f"--pidfile={self.directory}/docker.pid",
                "--bridge=none",  # containers run with --network host or none: no bridge, no iptables
                "--iptables=false",
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 60
        while self.docker("version", check=False, timeout=30).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError((self.directory / "dockerd.log").read_text()[-3000:])
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # dockerd leaves its exec root's netns/default bind-mounted
        mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
        for target in sorted(m for m in mounts.split() if m.startswith(f"{self.directory}/"))[::-1]:
            subprocess.run(["umount", "--lazy", target], capture_output=True, check=False)


@dataclass
class Image:
    """The image built from the Dockerfile, on its engine."""

    engine: Engine
    tag: str
    build_seconds: float
    size_bytes: int
    _archive: Path | None = field(default=None, repr=False)

    def archive(self) -> Path:
        """``docker save`` of the image (what a node imports), made once."""
        if self._archive is None:
            path = self.engine.directory / "tokenrelay-image.tar"
            self.engine.docker("save", "-o", str(path), self.tag)
            self._archive = path
        return self._archive


def wheelhouse(directory: Path) -> None:
    """Every wheel the builds need (``EXTRAS``' too), setuptools (the build backend) included, from
    this venv's pip."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-build-isolation",
            "--wheel-dir",
            str(directory),
            f"{REPO}[{EXTRAS}]",
            "setuptools>=77,<85",
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )


def base_archive(command: list[str] = MMDEBSTRAP) -> Path:
    """An mmdebstrap base (the runtime's, the builder's...), kept between sessions like pip's cache (about
    25 s to make, the longest step of the build); a change of its command makes a new one."""
    return base_archives(command)[0]


def base_archives(*commands: list[str]) -> list[Path]:
    """The bases of ``commands``, the missing ones made side by side (mmdebstrap waits on downloads)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tokenrelay-tests"
    cache.mkdir(parents=True, exist_ok=True)
    bases = [cache / f"base-{hashlib.sha256(json.dumps(c).encode()).hexdigest()[:16]}.tar" for c in commands]
    making = []
    for command, base in zip(commands, bases, strict=True):
        if not base.exists():
            partial = base.with_suffix(f".{os.getpid()}.partial.tar")  # mmdebstrap picks the format by suffix
            making.append((subprocess.Popen([*command, str(partial)], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE), partial, base))  # fmt: skip
    for process, partial, base in making:
        _, errors = process.communicate(timeout=600)
        if process.returncode:
            raise AssertionError(f"mmdebstrap failed: {errors.decode(errors='replace')[-3000:]}")
        partial.rename(base)
    return bases


def build_on(engine: Engine, runtime: str) -> subprocess.CompletedProcess[str]:
    """The Dockerfile built again (its builder stage cached) on another runtime base, with its output."""
    return engine.docker(
        "build",
        "--network=none",
        f"--build-arg=PYTHON_IMAGE={runtime}",
        f"--build-arg=BUILDER_IMAGE={BUILDER_TAG}",
        "--build-arg=PIP_NO_INDEX=1",
        str(engine.directory / "context"),
        timeout=600,
        check=False,
    )


def build(engine: Engine) -> Image:
    runtime, builder, _ = base_archives(
        MMDEBSTRAP, BUILDER, NO_PYTHON
    )  # the last for one test, made meanwhile
    engine.docker("import", str(runtime), BASE_TAG)
    engine.docker("import", str(builder), BUILDER_TAG)
    context = engine.directory / "context"
    context.mkdir()
    for name in CONTEXT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, context / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, context / name)
    wheelhouse(context / "wheelhouse")
    return tagged(engine, TAG)


def tagged(engine: Engine, tag: str, *build_args: str) -> Image:
    """The Dockerfile built offline as ``tag`` on ``engine``, whose context ``build`` made."""
    started = time.monotonic()
    engine.docker(
        "build",
        "--quiet",
        "--network=none",
        f"--build-arg=PYTHON_IMAGE={BASE_TAG}",
        f"--build-arg=BUILDER_IMAGE={BUILDER_TAG}",
        "--build-arg=PIP_NO_INDEX=1",
        *(f"--build-arg={arg}" for arg in build_args),
        f"--tag={tag}",
        str(engine.directory / "context"),
        timeout=600,
    )
    seconds = time.monotonic() - started
    size = int(engine.docker("image", "inspect", "--format={{.Size}}", tag).stdout)
    return Image(engine, tag, seconds, size)


def with_extras(image: Image) -> Image:
    """The image built again with ``--build-arg EXTRAS=aws,spiffe`` on the same engine: the builder's
    base install is a cached layer, so this costs the extras' install, the strip and the copy."""
    return tagged(image.engine, EXTRAS_TAG, f"EXTRAS={EXTRAS}")


@contextmanager
def built_image() -> Iterator[Image]:
    """A private engine with the image built on it; the engine stops at the end, or when this process
    dies."""
    need("dockerd", "docker", "mmdebstrap")
    engine = Engine(short_dir("tr-docker-"))
    engine.start()
    assert engine.process is not None
    netns = engine.directory / "exec" / "netns" / "default"  # dockerd leaves it mounted
    watcher = reaper(f"kill {engine.process.pid}; sleep 10; umount -l {netns}; rm -rf {engine.directory}")
    try:
        yield build(engine)
    finally:
        engine.stop()
        shutil.rmtree(engine.directory, ignore_errors=True)
        stop_reaper(watcher)


@dataclass
class RunningEmulator:
    """``tokenrelay emulate --seed`` on the host's loopback (containers and pods use the host's
    network), and the seeded owner identity."""

    process: subprocess.Popen[str]
    url: str
    organization: str
    owner: str
    lines: dict[str, str] = field(default_factory=dict)  # what it printed at start, by label

    def mint(self, subject: str = "seed-owner") -> str:
        minted = subprocess.run(
            [TOKENRELAY, "emulate", "mint", "--url", self.url, "--sub", subject],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return minted.stdout.strip()

    def call(self, method: str, path: str, token: str, body: Any = None) -> Any:
        """One call of the emulator's API as an identity holding ``token``; the decoded answer."""
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def api_token(self, identity: str, oidc_token: str) -> str:
        """The token service's answer for ``identity`` to ``oidc_token``."""
        query = urllib.parse.urlencode({"aud": self.url, "identity": identity})
        answer = self.call("GET", f"/sts/exchange?{query}", oidc_token)
        token: str = answer["token"]
        return token


@contextmanager
def emulator(*extra: str) -> Iterator[RunningEmulator]:
    process = subprocess.Popen(
        [TOKENRELAY, "emulate", "--listen", "127.0.0.1:0", "--seed", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    lines: dict[str, str] = {}
    for line in process.stdout:
        key, _, value = line.partition(": ")
        lines[key] = value.strip()
        if key.startswith("try"):
            break
    try:
        assert "seed owner identity" in lines, f"tokenrelay emulate did not start: {lines}"
        owner = lines["seed owner identity"].split()[0]
        yield RunningEmulator(process, lines["emulator"], lines["seed organization"], owner, lines)
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()
