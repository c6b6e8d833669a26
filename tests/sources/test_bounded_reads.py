"""A source's bounded waits: past the timeout, one line; cancelled (SIGTERM, the sidecar stopping) as
the call it waits on completes, the read ends cancelled. They are ``asyncio.timeout``, which honours
such a cancel, where Python 3.11's ``wait_for`` returned the call's result and dropped it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tokenrelay.emulator import Emulator
from tokenrelay.errors import IdTokenError
from tokenrelay.testing import make_jwt
from tokenrelay.tokens.idsources import SOURCES, SourceInputs, commands

from ..support.cancelling import cancel_as_it_wakes
from ..support.helpers import script
from ..support.waiting import eventually, eventually_blocking
from .test_cloud_sources import aws_env


def started(reading: asyncio.Task[Any]) -> bool:
    """Whether the read has started its command: ``commands.output`` holds the process."""
    coro: Any = reading.get_coro()
    while coro is not None and getattr(coro, "cr_code", None) is not commands.output.__code__:
        coro = getattr(coro, "cr_await", None)
    return coro is not None and "process" in coro.cr_frame.f_locals


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and waiting for its reaper, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped (ESRCH: between the open and the read)
        return False


async def test_a_command_read_cancelled_as_the_command_ends_is_cancelled(tmp_path: Path) -> None:
    """buildkite-agent (a real subprocess) prints its token and exits just as the read is cancelled:
    the read ends cancelled, not with the token."""
    agent = tmp_path / "buildkite-agent"
    agent.write_text('#!/bin/sh\nprintf "%s\\n" "$JOB_TOKEN"\n')
    agent.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "JOB_TOKEN": make_jwt({"exp": time.time() + 600})}
    source = SOURCES["buildkite"].build(SourceInputs(environ=env, audience="https://auth.example"))
    reading = asyncio.ensure_future(source.read())
    cancel_as_it_wakes(reading, armed=lambda: started(reading))
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert reading.cancelled()


async def test_a_command_past_the_timeout_is_stopped_and_one_line(tmp_path: Path) -> None:
    """A platform command that never ends is killed at the exchange timeout, and said so in one line."""
    agent = tmp_path / "buildkite-agent"
    agent.write_text(f'#!/bin/sh\necho $$ > "{tmp_path}/pid"\nexec sleep 600\n')
    agent.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    source = SOURCES["buildkite"].build(SourceInputs(environ=env, audience="https://a.example", timeout=0.2))
    with pytest.raises(IdTokenError) as stuck:
        await source.read()
    assert stuck.value.message == (
        "`buildkite-agent oidc request-token` did not finish within 0.2s and was stopped"
    )
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int((tmp_path / "pid").read_text()), 0)


async def test_a_cancelled_command_read_stops_the_command(tmp_path: Path) -> None:
    """A read cancelled while its platform command runs (SIGTERM, the sidecar stopping) stops that
    command too: nothing of tokenrelay's is left running."""
    agent = tmp_path / "buildkite-agent"
    agent.write_text(f'#!/bin/sh\necho $$ > "{tmp_path}/pid"\nexec sleep 600\n')
    agent.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    source = SOURCES["buildkite"].build(SourceInputs(environ=env, audience="https://a.example"))
    reading = asyncio.ensure_future(source.read())
    pid_file = tmp_path / "pid"
    await eventually(lambda: started(reading) and pid_file.exists() and pid_file.read_text().endswith("\n"))
    pid = int(pid_file.read_text())
    reading.cancel()
    try:
        with pytest.raises(asyncio.CancelledError):
            await reading
        await eventually(lambda: not alive(pid), "the command to be killed and reaped")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_to_exec_while_the_platform_command_runs_stops_both(tmp_path: Path) -> None:
    """SIGTERM to `tokenrelay exec` while buildkite-agent mints: exec exits 143 without running the
    command, and buildkite-agent does not run on after it."""
    agent = tmp_path / "bin" / "buildkite-agent"
    agent.parent.mkdir()
    # the pid file appears whole (written, then renamed), then the agent hangs as on a slow network
    agent.write_text(
        f'#!/bin/sh\necho $$ > "{tmp_path}/p"\nmv "{tmp_path}/p" "{tmp_path}/pid"\nexec sleep 600\n'
    )
    agent.chmod(0o755)
    pid_file, marker = tmp_path / "pid", tmp_path / "ran"
    env = {"PATH": f"{agent.parent}:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    argv = [
        script("tokenrelay"),
        "exec",
        "--auth-url=http://127.0.0.1:9",
        "--api-url=https://api.example.test",
        "--identity=acme/ci",
        "--id-token-source=buildkite",
        "--log-level=error",
        "--",
        "touch",
        str(marker),
    ]
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        eventually_blocking(pid_file.exists, "buildkite-agent to start")
        pid = int(pid_file.read_text())
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 128 + signal.SIGTERM
        eventually_blocking(lambda: not alive(pid), "buildkite-agent to be stopped")
        assert not marker.exists()
    finally:
        process.kill()
        process.wait()
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


async def test_an_aws_read_cancelled_as_sts_answers_is_cancelled(emulator: Emulator) -> None:
    """STS's answer (botocore's call, in a thread) arrives just as the read is cancelled: the read ends
    cancelled, not with the token."""
    source = SOURCES["aws"].build(SourceInputs(environ=aws_env(emulator), audience="https://auth.example"))
    reading = asyncio.ensure_future(source.read())
    cancel_as_it_wakes(reading)
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert reading.cancelled() and emulator.platforms.calls["aws"] == 1
