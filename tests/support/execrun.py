"""``tokenrelay exec`` as a user runs it, against the credential helpers' session stack."""

from __future__ import annotations

import os
import subprocess
import time

from tokenrelay.testing import make_jwt

from .helpers import IDENTITY, Stack, script

API = "https://api.example.test"
# What a CI image without tokenrelay's bin on PATH has: the command must still find the helpers.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def exec_argv(auth_url: str, *flags: str, command: list[str]) -> list[str]:
    """``tokenrelay exec`` with run's flags for the fake token service, ``flags``, then the command."""
    return [
        script("tokenrelay"),
        "exec",
        f"--auth-url={auth_url}",
        f"--api-url={API}",
        f"--identity={IDENTITY}",
        "--id-token-env=OIDC_TOKEN",
        "--log-level=error",
        *flags,
        "--",
        *command,
    ]


def exec_env(client_env: dict[str, str], **extra: str) -> dict[str, str]:
    """A client's environment with the OIDC token exec exchanges, and tokenrelay's bin off PATH."""
    oidc = make_jwt({"sub": "builder", "exp": int(time.time()) + 86400})
    return {**client_env, "PATH": SYSTEM_PATH, "OIDC_TOKEN": oidc, **extra}


def run_exec(
    stack: Stack, env: dict[str, str], *flags: str, command: list[str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    argv = exec_argv(stack.token_server.url, *flags, command=command)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def private_dirs(tmpdir: str) -> list[str]:
    """What exec left in ``tmpdir`` (its TMPDIR)."""
    return sorted(name for name in os.listdir(tmpdir) if name.startswith("tokenrelay-exec-"))
