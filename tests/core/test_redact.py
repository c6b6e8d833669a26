"""The token fingerprint's contract: what logs, ``status`` and the doctor show in place of a token."""

from __future__ import annotations

import re
import subprocess

from hypothesis import given
from hypothesis import strategies as st

from tokenrelay.lite.redact import fingerprint
from tokenrelay.tokens.token import Token

TOKENS = ["t1", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "jeton-été-✓", "x" * 10_000]


def test_a_fingerprint_is_what_sha256sum_prints_cut_to_8_digits() -> None:
    """An operator holding a token finds its log lines with ``printf %s "$TOKEN" | sha256sum | cut -c1-8``
    (the command docs/troubleshooting.md gives), non-ASCII tokens included."""
    for token in TOKENS:
        printed = subprocess.run(
            ["sha256sum"], input=token.encode(), capture_output=True, check=True, timeout=10
        ).stdout.decode()
        assert fingerprint(token) == printed[:8]


@given(st.text())
def test_a_fingerprint_is_8_lowercase_hex_digits_and_stable(secret: str) -> None:
    """Whatever the secret, its fingerprint has one shape, and the same secret gives the same one."""
    assert re.fullmatch(r"[0-9a-f]{8}", fingerprint(secret))
    assert fingerprint(secret) == fingerprint(secret[:]) == fingerprint("".join(secret))


def test_successive_tokens_have_distinct_fingerprints() -> None:
    """Rotation is visible: a thousand successive tokens (t1, t2, ...) give a thousand fingerprints."""
    assert len({fingerprint(f"t{n}") for n in range(1, 1001)}) == 1000


def test_a_token_shows_its_fingerprint_never_its_value() -> None:
    """A Token's fingerprint is its value's, and its repr (what a log or traceback prints) omits the value."""
    token = Token("s3cr3t-token-value", "aud", 0.0, 3600.0, 1800.0, 3600.0)
    assert token.fingerprint == fingerprint("s3cr3t-token-value")
    assert "s3cr3t" not in repr(token)
