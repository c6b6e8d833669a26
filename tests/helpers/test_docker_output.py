"""docker-credential-tokenrelay writes its JSON by hand: what docker reads must be what json.dumps writes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tokenrelay.helpers.docker import answer, json_string

# Every code point, lone surrogates included: stdin decoded with surrogateescape can carry them.
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()))


@given(ANY_TEXT)
def test_json_string_is_exactly_json_dumps(text: str) -> None:
    """Any text is encoded byte for byte as json.dumps does (ASCII only), and decodes back to itself."""
    encoded = json_string(text)
    assert encoded == json.dumps(text)
    assert encoded.isascii()
    assert json.loads(encoded) == text


def test_json_string_escapes() -> None:
    """Quotes, backslashes, controls, DEL and characters beyond ASCII take JSON's escapes."""
    assert json_string('a"b\\c') == '"a\\"b\\\\c"'
    assert json_string("\b\t\n\f\r\x00\x1f\x7f") == '"\\b\\t\\n\\f\\r\\u0000\\u001f\\u007f"'
    assert json_string("é\U0001f600") == '"\\u00e9\\ud83d\\ude00"'


@given(ANY_TEXT, ANY_TEXT)
def test_get_answer_is_what_json_dump_wrote(server: str, token: str) -> None:
    """``get``'s line is the same bytes as the json.dump of its object that earlier versions wrote."""
    expected = json.dumps({"ServerURL": server, "Username": "_token", "Secret": token}) + "\n"
    assert answer(server, token) == expected
