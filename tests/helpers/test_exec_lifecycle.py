"""``tokenrelay exec``: the command's exit status, the signals it is sent, the private directory, what
its environment holds, and how the relay fails, with the installed command and real subprocesses."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tokenrelay.lite import aip193
from tokenrelay.lite.redact import fingerprint
from tokenrelay.testing import FakeTokenService, ThreadedServer, loopback_certificates, refusal

from ..support.execrun import exec_argv, exec_env, private_dirs, run_exec
from ..support.helpers import Stack, require
from ..support.paths import short_dir
from ..support.waiting import Lines, eventually_blocking

pytestmark = pytest.mark.e2e


@pytest.fixture
def env(client_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The client's environment with a TMPDIR of its own (short: the socket's path must fit), to see
    what exec leaves there."""
    tmpdir = short_dir("trx-")
    yield exec_env(client_env, TMPDIR=str(tmpdir))
    shutil.rmtree(tmpdir)


def test_exit_status_is_the_commands(stack: Stack, env: dict[str, str]) -> None:
    """exec exits with the command's own status, and its output passes through untouched."""
    result = run_exec(stack, env, command=["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (result.returncode, result.stdout, result.stderr) == (7, "out\n", "err\n")


def test_killed_by_a_signal_is_128_plus_n(stack: Stack, env: dict[str, str]) -> None:
    """A command killed by signal N makes exec exit 128+N, as a shell reports it."""
    result = run_exec(stack, env, command=["sh", "-c", "kill -KILL $$"])
    assert result.returncode == 128 + signal.SIGKILL


def test_the_command_starts_with_a_token_on_its_private_socket(stack: Stack, env: dict[str, str]) -> None:
    """The command finds ``tokenrelay`` on PATH and a token on TOKENRELAY_SOCKET, a socket in a fresh
    0700 directory (not the sidecar's of the environment), which is gone once exec has exited."""
    script = 'd=$(dirname "$TOKENRELAY_SOCKET"); stat -c %a "$d"; echo "$TOKENRELAY_SOCKET"; tokenrelay token'
    result = run_exec(stack, env, command=["sh", "-c", script])
    assert result.returncode == 0, result.stderr
    mode, socket, token = result.stdout.splitlines()
    assert mode == "700"
    assert socket != stack.socket
    assert Path(socket).parent.parent == Path(env["TMPDIR"])
    assert token in stack.service.issued
    assert private_dirs(env["TMPDIR"]) == []


def test_signals_are_forwarded_to_the_command(stack: Stack, env: dict[str, str]) -> None:
    """HUP, INT and QUIT sent to exec reach the command, which keeps running; TERM's exit is its own."""
    child = textwrap.dedent(
        """
        import os, signal
        def heard(signum, frame):
            os.write(1, f"{signal.Signals(signum).name}\\n".encode())  # unbuffered: no reentrant print
            if signum == signal.SIGTERM:
                os._exit(42)
        for name in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM"):
            signal.signal(getattr(signal, name), heard)
        os.write(1, b"ready\\n")
        while True:
            signal.pause()
        """
    )
    argv = exec_argv(stack.token_server.url, command=[sys.executable, "-c", child])
    # a session of its own: no terminal's foreground group (exec leaves keyboard signals to it then),
    # and one group to end, exec and the command both, when a signal is lost
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, start_new_session=True) as process:
        assert process.stdout is not None
        lines = Lines(process.stdout)
        try:
            assert lines.next("the command to start") == "ready"
            for sent in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
                process.send_signal(sent)
                assert lines.next(f"the command to hear {sent.name}", timeout=10) == sent.name
            assert process.wait(30) == 42
        except BaseException:
            with contextlib.suppress(
                ProcessLookupError
            ):  # else the with waits for exec, or the command lingers
                os.killpg(process.pid, signal.SIGKILL)
            raise
    assert private_dirs(env["TMPDIR"]) == []


def test_term_kills_the_command_and_the_private_directory_goes(stack: Stack, env: dict[str, str]) -> None:
    """SIGTERM to exec ends a command that does not handle it: status 143, the directory removed."""
    argv = exec_argv(stack.token_server.url, command=["sh", "-c", 'echo "$TOKENRELAY_SOCKET"; exec sleep 60'])
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        socket = Path(process.stdout.readline().strip())
        assert socket.exists()
        process.terminate()
        assert process.wait(30) == 128 + signal.SIGTERM
    assert not socket.parent.exists()


def test_no_token_is_125_in_one_line_and_the_command_never_runs(
    stack: Stack, env: dict[str, str], tmp_path: Path
) -> None:
    """When the relay cannot get a token, exec says why in one line naming the fix, exits 125, and
    never runs the command; it leaves no private directory behind."""
    marker = tmp_path / "ran"
    env = {key: value for key, value in env.items() if key != "OIDC_TOKEN"}
    result = run_exec(stack, env, command=["touch", str(marker)])
    assert result.returncode == 125
    assert result.stderr.splitlines() == [
        "tokenrelay exec: no token for audience https://api.example.test: environment variable "
        "OIDC_TOKEN (named by --id-token-env) is not set; export the OIDC token in OIDC_TOKEN where "
        "tokenrelay runs"
    ]
    assert not marker.exists()
    assert private_dirs(env["TMPDIR"]) == []


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--configure=gradle"],
            "--configure: gradle is not a target; choose from docker, git, pip, npm, maven, netrc, all",
        ),
        (["--once"], "--once (env TOKENRELAY_ONCE) does not go with exec"),
        (["--socket=/tmp/x.sock"], "--socket (env TOKENRELAY_SOCKET) does not go with exec"),
        (["--export-token=NOT-A-NAME"], "--export-token (env TOKENRELAY_EXPORT_TOKEN): 'NOT-A-NAME'"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_bad_flags_are_125_naming_the_flag(
    stack: Stack, env: dict[str, str], tmp_path: Path, flags: list[str], says: str
) -> None:
    """A bad flag is exit status 125 (the command's statuses stay its own) with a line naming it."""
    marker = tmp_path / "ran"
    result = run_exec(stack, env, *flags, command=["touch", str(marker)])
    assert result.returncode == 125
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists()


def test_without_dashes_is_125_with_the_usage(stack: Stack, env: dict[str, str]) -> None:
    """The command must follow ``--``: without it exec says so and exits 125."""
    argv = exec_argv(stack.token_server.url, command=["true"])
    argv.remove("--")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 125
    assert "give the command after --" in result.stderr


def test_flags_after_the_dashes_belong_to_the_command(stack: Stack, env: dict[str, str]) -> None:
    """Words after ``--`` go to the command verbatim, even ones that are exec's flags."""
    words = ["--proxy-listen", "x", "--help", "--", "--once"]
    result = run_exec(stack, env, command=["sh", "-c", 'printf "%s\\n" "$@"', "sh", *words])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == words


def test_not_found_is_127_and_not_executable_is_126(
    stack: Stack, env: dict[str, str], tmp_path: Path
) -> None:
    """Like env(1): a command that is not found exits 127, one that cannot be run 126."""
    missing = run_exec(stack, env, command=["no-such-command-anywhere"])
    assert missing.returncode == 127
    assert missing.stderr == "tokenrelay exec: no-such-command-anywhere: command not found\n"
    plain = tmp_path / "plain.sh"
    plain.write_text("echo hi\n")
    refused = run_exec(stack, env, command=[str(plain)])
    assert refused.returncode == 126
    assert refused.stderr.startswith(f"tokenrelay exec: {plain}: cannot run it")
    assert private_dirs(env["TMPDIR"]) == []


def test_the_token_stays_out_of_the_environment_unless_exported(stack: Stack, env: dict[str, str]) -> None:
    """The command's environment holds no token; --export-token VAR puts the API token in VAR."""
    plain = run_exec(stack, env, command=["env"])
    assert plain.returncode == 0, plain.stderr
    assert not any(token in plain.stdout for token in stack.service.issued)
    exported = run_exec(stack, env, "--export-token=API_TOKEN", command=["sh", "-c", 'echo "$API_TOKEN"'])
    assert exported.returncode == 0, exported.stderr
    token = exported.stdout.strip()
    assert token in stack.service.issued
    assert fingerprint(token) not in exported.stderr


def test_proxy_url_names_the_port_the_proxy_bound(stack: Stack, env: dict[str, str]) -> None:
    """With --proxy-listen 127.0.0.1:0 the command gets TOKENRELAY_PROXY_URL with the real port, and
    something listens there."""
    probe = (
        "import os, socket, urllib.parse; url = urllib.parse.urlsplit(os.environ['TOKENRELAY_PROXY_URL']); "
        "socket.create_connection((url.hostname, url.port), 5).close(); print(url.scheme, url.hostname)"
    )
    result = run_exec(stack, env, "--proxy-listen=127.0.0.1:0", command=[sys.executable, "-c", probe])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "http 127.0.0.1\n"


def test_tokens_stay_fresh_for_the_commands_life(client_env: dict[str, str], tmp_path: Path) -> None:
    """A command that outlives its first token gets the next one from the socket: exec refreshes."""
    service = FakeTokenService(lifetime=4.0)
    server = ThreadedServer(service.app()).start()
    child = textwrap.dedent(
        """
        import subprocess, time
        first = subprocess.run(["tokenrelay", "token"], capture_output=True, text=True).stdout
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            now = subprocess.run(["tokenrelay", "token"], capture_output=True, text=True).stdout
            if now != first:
                print("refreshed")
                break
            time.sleep(0.2)
        """
    )
    try:
        argv = exec_argv(server.url, command=[sys.executable, "-c", child])
        env = exec_env(client_env)
        env.pop("TOKENRELAY_HOSTS")
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "refreshed\n"
    assert service.calls >= 2


def test_private_directory_is_not_shared(stack: Stack, env: dict[str, str]) -> None:
    """The private directory and the socket in it belong to the user alone."""
    result = run_exec(stack, env, command=["sh", "-c", 'stat -c %a "$TOKENRELAY_SOCKET"'])
    assert result.returncode == 0, result.stderr
    assert int(result.stdout, 8) & (stat.S_IRWXG | stat.S_IRWXO) == 0


def test_the_relay_trusts_the_roots_ssl_cert_file_names(client_env: dict[str, str], tmp_path: Path) -> None:
    """With the token service on https, signed by a CA only SSL_CERT_FILE names, exec gets its token
    and the command sees SSL_CERT_FILE as it was (the relay loads aiohttp without the default roots)."""
    certificates = loopback_certificates(tmp_path)
    service = FakeTokenService()
    server = ThreadedServer(service.app(), certificates.server_context()).start()
    try:
        argv = exec_argv(server.url, command=["sh", "-c", 'echo "$SSL_CERT_FILE"; tokenrelay token'])
        env = exec_env(client_env, SSL_CERT_FILE=certificates.ca)
        env.pop("TOKENRELAY_HOSTS")
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    named, token = result.stdout.splitlines()
    assert named == certificates.ca
    assert token in service.issued


def test_a_signal_before_the_first_token_stops_the_start(client_env: dict[str, str], tmp_path: Path) -> None:
    """TERM while exec still waits out a token-service outage ends it with 143; the command never runs."""
    service = FakeTokenService()

    async def unavailable(request: web.Request) -> web.Response:
        return refusal(aip193.Code.UNAVAILABLE, "down for maintenance", 503)

    service.behaviour = unavailable
    server = ThreadedServer(service.app()).start()
    marker = tmp_path / "ran"
    tmpdir = short_dir("trx-")
    try:
        env = exec_env(client_env, TMPDIR=str(tmpdir))
        env.pop("TOKENRELAY_HOSTS")
        argv = exec_argv(server.url, "--wait-timeout=60", command=["touch", str(marker)])
        with subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL) as process:
            eventually_blocking(lambda: service.calls >= 1, "exec's first exchange")
            process.terminate()
            assert process.wait(30) == 128 + signal.SIGTERM
        assert not marker.exists()
        assert private_dirs(str(tmpdir)) == []
    finally:
        server.stop()
        shutil.rmtree(tmpdir)


def test_hosts_come_from_the_config_file(stack: Stack, env: dict[str, str], tmp_path: Path) -> None:
    """Without --hosts or TOKENRELAY_HOSTS, exec takes the hosts of the --config file, keeps their
    audiences fresh and hands the command the list."""
    config = tmp_path / "tokenrelay.toml"
    config.write_text(f'hosts = ["{stack.git.netloc}"]\n')
    env.pop("TOKENRELAY_HOSTS")
    show = 'echo "$TOKENRELAY_HOSTS"; tokenrelay token --audience "${TOKENRELAY_HOSTS#*=}"'
    result = run_exec(stack, env, f"--config={config}", command=["sh", "-c", show])
    assert result.returncode == 0, result.stderr
    hosts, token = result.stdout.splitlines()
    assert hosts == f"{stack.git.netloc}={stack.git.netloc}"
    assert token in stack.service.issued


def test_configure_git_keeps_the_environments_own_git_settings(stack: Stack, env: dict[str, str]) -> None:
    """--configure git adds its entries after the GIT_CONFIG_COUNT ones the environment already has."""
    git = require("git")
    env.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "CI Bot"})
    url = f"http://{stack.git.netloc}"
    show = f"{git} config user.name; {git} config --get-all credential.{url}.helper"
    result = run_exec(stack, env, "--configure=git", command=["sh", "-c", show])
    assert result.returncode == 0, result.stderr
    name, reset, helper = result.stdout.split("\n")[:3]
    assert (name, reset) == ("CI Bot", "")
    assert helper.endswith("/bin/git-credential-tokenrelay")


def test_a_proxy_port_already_taken_is_125(stack: Stack, env: dict[str, str], tmp_path: Path) -> None:
    """--proxy-listen on a port another process holds fails the start with one line naming the flag."""
    marker = tmp_path / "ran"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run_exec(stack, env, f"--proxy-listen=127.0.0.1:{port}", command=["touch", str(marker)])
    assert result.returncode == 125
    assert result.stderr == (
        f"tokenrelay exec: --proxy-listen (env TOKENRELAY_PROXY_LISTEN): cannot listen on 127.0.0.1:{port}: "
        "the address is already in use; stop what listens there or choose another port\n"
    )
    assert not marker.exists()
    assert private_dirs(env["TMPDIR"]) == []
