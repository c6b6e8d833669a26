"""The helpers decode JSON without importing json: what they read must be what json.loads reads."""

from __future__ import annotations

import base64
import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenrelay.lite.jwtclaims import unverified_claims
from tokenrelay.lite.litejson import loads

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)
SPACE = st.text(" \t\n\r", max_size=3)


@given(JSON_VALUES, SPACE, SPACE, st.booleans())
def test_loads_is_exactly_json_loads(value: Any, before: str, after: str, as_bytes: bool) -> None:
    """Any JSON document, padded with JSON whitespace, as text or UTF-8 bytes, decodes as json.loads does."""
    text = before + json.dumps(value, ensure_ascii=False) + after
    raw: str | bytes = text.encode() if as_bytes else text
    assert loads(raw) == json.loads(raw)


@given(st.text(max_size=20) | st.binary(max_size=20))
def test_anything_else_is_refused_or_read_as_json_does(raw: str | bytes) -> None:
    """Arbitrary input gives json.loads' value, or a ValueError where json.loads raises one."""
    try:
        expected = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        with pytest.raises(ValueError):
            loads(raw)
        return
    got = loads(raw)
    assert got == expected or (isinstance(got, float) and math.isnan(got) and math.isnan(expected))


def test_decoding_imports_neither_json_nor_re() -> None:
    """A JWT's claims and the local API's JSON answer decode without loading json (and its re), nor
    binascii for a JWT's plain base64url."""
    code = (
        "import sys; before = set(sys.modules); from tokenrelay.lite.jwtclaims import unverified_claims; "
        "from tokenrelay.lite.litejson import loads; "
        "assert unverified_claims('e30.eyJleHAiOiAxfQ.c2ln') == {'exp': 1}; "
        "assert loads(b'{\"token\": \"t\"}') == {'token': 't'}; "
        "print(sorted(m for m in ('json', 're', 'enum', 'binascii') if m in set(sys.modules) - before))"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=False)
    if "No module named 'tokenrelay'" in result.stderr:  # an editable install needs site
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stderr


@given(
    st.binary(max_size=40),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=. \n", max_size=8),
)
def test_claims_segment_decodes_as_urlsafe_b64decode(payload: bytes, extra: str) -> None:
    """A JWT's payload segment, plain base64url or not, yields the claims urlsafe_b64decode (with the
    padding restored) reads from it, or None where that fails."""
    claims = b'{"exp": 1, "p": "' + payload.hex().encode() + b'"}'
    segment = base64.urlsafe_b64encode(claims).decode().rstrip("=") + extra
    try:
        expected = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except ValueError:
        expected = None
    if not segment or segment.split(".") != [segment] or not isinstance(expected, dict):
        expected = None
    assert unverified_claims(f"e30.{segment}.c2ln") == expected
