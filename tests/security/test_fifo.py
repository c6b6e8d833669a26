"""A FIFO where the sidecar reads a file (the OIDC token, the --config file on SIGHUP) must not freeze
it: the file is refused with a clear error and the socket keeps answering.

The sidecar runs as a subprocess, so that a frozen event loop shows as a socket that stops answering
rather than as a hung test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenrelay.lite.socketclient import LocalApiError, fetch_token

pytestmark = pytest.mark.e2e

TOKENRELAY = str(Path(sys.executable).parent / "tokenrelay")


def wait_for_socket(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    while not path.exists():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the sidecar never made its socket"
        time.sleep(0.02)


def refusal(socket: Path) -> LocalApiError:
    """The sidecar's answer on the socket, which must come (as a refusal: no token service here)."""
    with pytest.raises(LocalApiError) as caught:
        fetch_token(str(socket), timeout=5.0)
    return caught.value


@pytest.fixture
def workdir() -> Iterator[Path]:
    # A short path: Unix socket paths are limited to 108 bytes.
    path = Path(f"/tmp/trfifo-{os.getpid()}")
    path.mkdir()
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def start(workdir: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            TOKENRELAY,
            "run",
            "--auth-url=http://127.0.0.1:9",
            "--api-url=https://api.example.test",
            "--identity=org/identities/x",
            f"--socket={workdir}/s.sock",
            "--log-format=text",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    try:
        _, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # frozen: it cannot even handle SIGTERM
        process.kill()
        _, err = process.communicate()
    return err


def test_a_fifo_at_the_oidc_token_path_is_refused_and_the_socket_answers(workdir: Path) -> None:
    """--id-token-file naming a FIFO: the socket answers 503 saying so, instead of the sidecar freezing."""
    fifo = workdir / "oidc"
    os.mkfifo(fifo)
    process = start(workdir, f"--id-token-file={fifo}")
    try:
        wait_for_socket(workdir / "s.sock", process)
        error = refusal(workdir / "s.sock")
    finally:
        stop(process)
    assert error.status == 503
    assert str(error).startswith(
        f"no token for audience https://api.example.test: the OIDC token path {fifo} is a named pipe "
        f"(FIFO), not a regular file; mount the platform's token at {fifo} "
    )
    assert "or point --id-token-file (env TOKENRELAY_ID_TOKEN_FILE) at the token file itself (next " in str(
        error
    )


def test_a_fifo_at_the_config_path_on_sighup_is_refused_and_the_socket_answers(workdir: Path) -> None:
    """SIGHUP with a FIFO now at --config: the reload is refused with a log line, the socket answers."""
    config = workdir / "tokenrelay.toml"
    config.write_text('log_level = "info"\n')
    process = start(workdir, f"--config={config}", "--id-token-env=OIDC_TOKEN_UNSET")
    try:
        wait_for_socket(workdir / "s.sock", process)
        config.unlink()
        os.mkfifo(config)
        process.send_signal(signal.SIGHUP)
        error = refusal(workdir / "s.sock")
        assert error.status == 503
        assert refusal(workdir / "s.sock").status == 503  # and again, after the SIGHUP surely ran
    finally:
        err = stop(process)
    assert (
        f"SIGHUP: configuration not reloaded, keeping it error=--config (env TOKENRELAY_CONFIG): {config} "
        "is a named pipe (FIFO), not a regular file; point it at the TOML file"
    ) in err
