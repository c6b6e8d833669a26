"""Page tokens a client cannot read, edit or forge: AES-GCM sealed with the emulator's own secret.

The sealed payload holds the cursor (sort key of the last result served), the order, when it was
issued and a digest of the query that made it; the digest binds a token to that query, so a token
reused with other filters is refused by name rather than silently continuing another list. Any
token that does not open — forged, truncated, edited (even to another base64 spelling of the same
bytes), from another emulator — is code 3.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import secrets
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import invalid_argument
from .iam.store import Store

MAX_TOKEN = 4096
_NONCE = 12
_CONTEXT = b"tokenrelay-emulator page token v1"
KEY_NAME = "page-tokens"


def _not_ours() -> Exception:
    return invalid_argument("page_token", "not a page token from this API (pass nextPageToken unchanged)")


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def query_digest(query_id: str) -> str:
    return hashlib.sha256(query_id.encode()).hexdigest()[:32]


class PageTokens:
    """Seals and opens page tokens with one 256-bit key."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    @classmethod
    def stored(cls, store: Store) -> PageTokens:
        """The key kept in the store (so tokens survive a restart with ``--state``), made once."""
        key = store.key(KEY_NAME)
        if key is None or len(key) != 32:
            key = secrets.token_bytes(32)
            store.put_key(KEY_NAME, key)
        return cls(key)

    def seal(self, payload: dict[str, Any]) -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, json.dumps(payload, separators=(",", ":")).encode(), _CONTEXT)
        return _encode(nonce + sealed)

    def open(self, token: str) -> dict[str, Any]:
        """The payload of a token this emulator sealed; code 3 for anything else."""
        if len(token) > MAX_TOKEN or not token.isascii():
            raise _not_ours()
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            # the decoder skips stray characters and ignores a last character's unused bits: only the
            # spelling seal() made is ours, so a token has one form and an edited one is never accepted
            if _encode(raw) != token:
                raise ValueError("not the canonical spelling")
            plain = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _CONTEXT)
            payload = json.loads(plain)
        except (binascii.Error, ValueError, InvalidTag):
            raise _not_ours() from None
        if not isinstance(payload, dict):
            raise _not_ours()
        return payload
