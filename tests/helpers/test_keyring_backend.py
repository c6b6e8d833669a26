"""The keyring backend in process: which services it answers, and how it stays out of the way."""

from __future__ import annotations

import re

import pytest
from keyring.errors import KeyringError

from tokenrelay.helpers.keyring_backend import TokenRelayKeyring
from tokenrelay.lite.redact import fingerprint

from ..support.helpers import Stack


@pytest.fixture
def backend(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> TokenRelayKeyring:
    monkeypatch.setenv("TOKENRELAY_SOCKET", stack.socket)
    monkeypatch.setenv("TOKENRELAY_HOSTS", stack.index.netloc)
    return TokenRelayKeyring()


def test_configured_index_gets_token_credential(stack: Stack, backend: TokenRelayKeyring) -> None:
    """pip's call (index URL, no username) gets ``_token`` and the sidecar's token."""
    credential = backend.get_credential(f"{stack.index.url}/simple/", None)
    assert credential is not None
    assert credential.username == "_token"
    assert fingerprint(credential.password) == stack.current(stack.index.netloc)
    password = backend.get_password(stack.index.netloc, "_token")
    assert password is not None
    assert fingerprint(password) == stack.current(stack.index.netloc)


def test_other_services_and_usernames_get_none(stack: Stack, backend: TokenRelayKeyring) -> None:
    """Other hosts, and other usernames on the configured host, are left to other backends."""
    assert backend.get_credential("https://pypi.org/simple/", None) is None
    assert backend.get_credential(f"{stack.index.url}/simple/", "alice") is None
    assert backend.get_password(f"{stack.index.url}/simple/", "alice") is None


def test_storing_is_passed_on(backend: TokenRelayKeyring) -> None:
    """set/delete raise NotImplementedError, which keyring's chainer passes to the next backend."""
    with pytest.raises(NotImplementedError):
        backend.set_password("https://pypi.org/simple/", "alice", "pw")
    with pytest.raises(NotImplementedError):
        backend.delete_password("https://pypi.org/simple/", "alice")


def viable() -> bool:
    return bool(TokenRelayKeyring.viable)


def test_not_viable_without_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no hosts configured keyring does not pick the backend at all."""
    monkeypatch.delenv("TOKENRELAY_HOSTS", raising=False)
    monkeypatch.delenv("TOKENRELAY_CONFIG", raising=False)
    assert not viable()
    monkeypatch.setenv("TOKENRELAY_HOSTS", "pypi.example.com")
    assert viable()
    assert TokenRelayKeyring.priority == 9.0


def test_failure_for_a_configured_host_is_a_keyring_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A configured host without a token raises KeyringError with the fix, which pip shows as a warning."""
    monkeypatch.setenv("TOKENRELAY_HOSTS", "pypi.example.com")
    monkeypatch.setenv("TOKENRELAY_SOCKET", "/nonexistent/tokenrelay.sock")
    for name in ("TOKENRELAY_AUTH_URL", "TOKENRELAY_IDENTITY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(
        KeyringError, match=re.escape("no tokenrelay sidecar is listening at /nonexistent/tokenrelay.sock")
    ):
        TokenRelayKeyring().get_credential("https://pypi.example.com/simple/", None)
