"""git with a storing helper (``store``) configured too: the documented config keeps it out.

git hands a credential that worked to every helper configured for the host, and asks them in order:
``store`` would write the API token to ~/.git-credentials in plain text, and, listed first, replay
its stored (expired) token. git 2.39 (Debian 12) knows neither ``password_expiry_utc`` nor
``ephemeral``, so the empty ``helper =`` that docs/credential-helpers.md puts before ``helper =
tokenrelay`` is what keeps ``store`` out. These tests run the real git and the real ``store``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..support.helpers import GIT_SHA, Stack, require, run
from .test_docs import DOC

pytestmark = pytest.mark.e2e

STALE = "stale-token-from-an-earlier-run"


def documented_host_section(url: str) -> str:
    """The first ini block of the doc's git section, for the test server instead of git.example.com."""
    text = DOC.read_text()
    git = text[text.index("\n## git\n") : text.index("\n## pip, uv, twine")]
    block: str = re.findall(r"```ini\n(.*?)```", git, flags=re.DOTALL)[0]
    assert "https://git.example.com" in block
    return block.replace("https://git.example.com", url)


def home_with_store(env: dict[str, str], stack: Stack, host_section: str) -> Path:
    """A generic ``store`` helper, a stale stored token for the server, then the host's section."""
    credentials = Path(env["HOME"], ".git-credentials")
    credentials.write_text(f"{stack.git.url.replace('http://', f'http://_token:{STALE}@')}\n")
    Path(env["HOME"], ".gitconfig").write_text(f"[credential]\n\thelper = store\n{host_section}")
    return credentials


def test_documented_config_keeps_the_store_helper_out(stack: Stack, client_env: dict[str, str]) -> None:
    """With the documented reset, git neither replays store's stale token nor stores the API token."""
    git = require("git")
    credentials = home_with_store(client_env, stack, documented_host_section(stack.git.url))
    before = credentials.read_text()
    result = run([git, "ls-remote", f"{stack.git.url}/demo.git"], client_env)
    assert result.returncode == 0, result.stderr
    assert f"{GIT_SHA}\trefs/heads/main" in result.stdout
    assert credentials.read_text() == before  # the API token never reached ~/.git-credentials


def test_without_the_reset_store_replays_then_keeps_the_token(
    stack: Stack, client_env: dict[str, str]
) -> None:
    """Control: without the empty ``helper =``, store's stale token fails the first fetch and the
    second one leaves the API token in ~/.git-credentials, so the test above proves the reset."""
    git = require("git")
    section = f'[credential "{stack.git.url}"]\n\thelper = tokenrelay\n'
    credentials = home_with_store(client_env, stack, section)
    first = run([git, "ls-remote", f"{stack.git.url}/demo.git"], client_env)
    assert first.returncode != 0
    assert "Authentication failed" in first.stderr
    second = run([git, "ls-remote", f"{stack.git.url}/demo.git"], client_env)
    assert second.returncode == 0, second.stderr
    assert "_token:ey" in credentials.read_text()  # the API token, in plain text
