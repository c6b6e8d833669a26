"""The doctor suite's pieces: the emulator as platform (issuer and token service), the doctor run
in-process and its findings, a real ``tokenrelay run`` sidecar, and commands run off the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tokenrelay.doctor import cli
from tokenrelay.doctor.report import Check, Report
from tokenrelay.emulator import EmulatorServer

BIN = Path(sys.executable).parent
SUBJECT = "system:serviceaccount:team:builder"


@dataclass
class Platform:
    """The emulator (issuer and token service), an identity matching SUBJECT, and its OIDC token file."""

    server: EmulatorServer
    identity: str
    token_file: Path
    tokens: list[str] = field(default_factory=list, repr=False)  # every token written: none may leak

    @property
    def url(self) -> str:
        return self.server.url

    def write_token(self, subject: str = SUBJECT, audience: str | None = None, lifetime: float = 600) -> str:
        token = self.server.emulator.mint(subject, audience, lifetime)
        self.token_file.write_text(token)
        self.tokens.append(token)
        return token

    def argv(self, *extra: str) -> list[str]:
        """The doctor's flags: the same as ``tokenrelay run``'s."""
        return [
            "--auth-url",
            self.url,
            "--api-url",
            self.url,
            "--identity",
            self.identity,
            "--id-token-file",
            str(self.token_file),
            *extra,
        ]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tokenrelay doctor")
    cli.add_arguments(parser)
    return parser.parse_args(argv)


async def doctor(argv: list[str], environ: Mapping[str, str]) -> Report:
    """The doctor's report, run in-process as ``tokenrelay doctor ARGV`` in ``environ``."""
    return await cli.diagnose(parse(argv), environ)


def finding(report: Report, check_id: str) -> Check:
    found = [check for check in report.checks if check.id == check_id]
    assert len(found) == 1, report.text()
    return found[0]


@asynccontextmanager
async def sidecar(args: list[str], socket: Path, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``tokenrelay run ARGS`` until its socket answers; stopped with SIGTERM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENRELAY_")}
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            str(BIN / "tokenrelay"),
            "run",
            "--socket",
            str(socket),
            "--log-format",
            "text",
            *args,
            env=env,
            stdout=sink,
            stderr=sink,
        )
    try:
        deadline = time.monotonic() + 20
        while not socket.exists():
            assert process.returncode is None, log.read_text()
            if time.monotonic() > deadline:
                pytest.fail("the sidecar's socket did not appear: " + log.read_text())
            await asyncio.sleep(0.05)
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 20)


async def command(*argv: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command off the event loop (the emulator in this loop must keep answering meanwhile)."""
    return await asyncio.to_thread(
        subprocess.run,
        list(argv),
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
