"""The keyring backend as pip and uv find it.

pip's ``keyring-provider = import`` imports ``keyring`` in pip's own environment; its ``subprocess``
provider, and uv's, run the ``keyring`` command found on PATH. Either must see tokenrelay's backend
(``tokenrelay[keyring]`` installed beside it) ahead of any other.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Mapping

from .report import Check, failed, passed, skipped, warning

INSTALL = "pip install 'tokenrelay[keyring]' into the environment pip runs from"


def in_process() -> Check:
    """``keyring`` as imported by this interpreter (pip's ``import`` provider, when it is pip's)."""
    name = "clients.keyring.import"
    if importlib.util.find_spec("keyring") is None:
        return skipped(
            name,
            f"keyring is not installed beside this Python ({sys.executable}): pip's import provider "
            "finds nothing here",
            f"if pip or twine should get tokens here: {INSTALL}",
        )
    import keyring
    import keyring.backend
    import keyring.core
    from keyring.backends.chainer import ChainerBackend

    from ..helpers.keyring_backend import TokenRelayKeyring

    # Afresh: keyring decides once per process which backends are viable, and ours depends on the
    # environment (a long-lived caller, such as a test run, may have changed it since).
    reset = getattr(keyring.backend.get_all_keyring, "reset", None)
    if callable(reset):
        with contextlib.suppress(KeyError):  # never called yet: nothing to forget
            reset()
    keyring.core.init_backend()
    chosen = keyring.get_keyring()
    backends = list(chosen.backends) if isinstance(chosen, ChainerBackend) else [chosen]
    if any(isinstance(backend, TokenRelayKeyring) for backend in backends):
        return passed(name, f"keyring in {sys.prefix} chooses tokenrelay's backend ({type(chosen).__name__})")
    try:
        TokenRelayKeyring.priority  # noqa: B018 - raises when the backend is not viable
    except RuntimeError as exc:
        return failed(
            name,
            f"keyring skips tokenrelay's backend: {exc}",
            "export TOKENRELAY_HOSTS where pip runs",
        )
    return failed(
        name,
        f"keyring uses {type(chosen).__module__}.{type(chosen).__name__}, not tokenrelay's backend",
        "unset PYTHON_KEYRING_BACKEND and remove `default-keyring` from keyringrc.cfg "
        "(`python -m keyring diagnose` shows where it is)",
    )


def on_path(environ: Mapping[str, str]) -> Check:
    """The ``keyring`` command (uv's and pip's ``subprocess`` provider)."""
    name = "clients.keyring.command"
    command = shutil.which("keyring", path=environ.get("PATH"))
    if command is None:
        return skipped(
            name,
            "no keyring command on PATH: uv (--keyring-provider subprocess) finds no credentials",
            "if uv should get tokens: uv tool install keyring --with 'tokenrelay[keyring]'",
        )
    try:
        result = subprocess.run(
            [command, "--list-backends"],
            env=dict(environ),
            capture_output=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return warning(name, f"{command} --list-backends did not run: {exc}", "check that keyring works")
    listed = result.stdout.decode(errors="replace")
    if "TokenRelayKeyring" in listed:
        return passed(name, f"{command} lists tokenrelay's backend")
    return failed(
        name,
        f"{command} does not list tokenrelay's backend: uv and pip's subprocess provider get no token",
        "install the backend beside that keyring: uv tool install keyring --with 'tokenrelay[keyring]' "
        "(or pipx inject keyring 'tokenrelay[keyring]'), and export TOKENRELAY_HOSTS",
    )
