"""A Python keyring backend, so pip, uv, twine and poetry get ``("_token", <token>)`` for index hosts.

Registered under the ``keyring.backends`` entry point (install with the ``keyring`` extra). It is
viable only when hosts are configured (``TOKENRELAY_HOSTS`` or ``hosts`` in ``TOKENRELAY_CONFIG``),
and its priority puts it ahead of the desktop keyrings inside keyring's chainer: it answers for the
configured hosts and returns None for every other service, which the chainer then asks of the next
backend. It stores nothing: ``set_password`` and ``delete_password`` raise NotImplementedError, the
signal for the chainer to pass them on.
"""

from __future__ import annotations

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.credentials import SimpleCredential
from keyring.errors import KeyringError

from ..errors import HostsError
from . import USERNAME, CredentialError
from .hosts import load, match
from .source import fetch

# Above SecretService (5), KWallet (5.1), macOS and Windows (5): a configured host is ours first.
PRIORITY = 9.0


class TokenRelayKeyring(KeyringBackend):
    """Answers with the current tokenrelay token for the configured hosts, and nothing else."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]

    @properties.classproperty
    def priority(cls) -> float:
        try:
            hosts = load()
        except HostsError as exc:
            raise RuntimeError(str(exc)) from None
        if not hosts:
            raise RuntimeError("tokenrelay serves no hosts: set TOKENRELAY_HOSTS")
        return PRIORITY

    def get_credential(self, service: str, username: str | None) -> SimpleCredential | None:
        if username not in (None, "", USERNAME):
            return None
        token = self._token(service)
        return None if token is None else SimpleCredential(USERNAME, token)

    def get_password(self, service: str, username: str) -> str | None:
        return self._token(service) if username == USERNAME else None

    def set_password(self, service: str, username: str, password: str) -> None:
        raise NotImplementedError("tokenrelay fetches tokens and stores nothing")

    def delete_password(self, service: str, username: str) -> None:
        raise NotImplementedError("tokenrelay fetches tokens and stores nothing")

    @staticmethod
    def _token(service: str) -> str | None:
        try:
            host = match(load(), service)
            if host is None:
                return None
            return fetch(host.audience).token
        except (HostsError, CredentialError) as exc:
            raise KeyringError(f"tokenrelay: {exc}") from None
