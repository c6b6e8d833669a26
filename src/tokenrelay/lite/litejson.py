"""``json.loads`` without importing ``json``: for the credential helpers' hot path.

``import json`` pulls in ``re`` (its decoder's whitespace pattern), ``enum`` and more: on the git
helper's path that cost more than the rest of its run. The C scanner behind ``json`` (``_json``) is
cheap to load and decodes exactly as ``json.loads`` does; only the surrounding whitespace is
stripped here. Anything out of the ordinary (bytes that are not UTF-8, a decoding error to report)
goes to the real ``json``. Standard library only, and no ``typing``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the helpers import this module
if TYPE_CHECKING:
    from typing import Any

_WHITESPACE = " \t\n\r"  # JSON's, as json.decoder's pattern has it


class _Context:
    """What ``_json.make_scanner`` reads from a JSONDecoder: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


_scan: Any = None


def loads(raw: str | bytes) -> Any:
    """Exactly ``json.loads(raw)``; raises ValueError (json.JSONDecodeError) on what is not JSON."""
    global _scan
    if _scan is None:
        try:
            from _json import make_scanner
        except ImportError:  # an interpreter without the C accelerator
            import json

            return json.loads(raw)
        _scan = make_scanner(_Context())  # type: ignore[arg-type]  # duck-typed as a JSONDecoder
    if isinstance(raw, bytes):
        try:
            text = raw.decode()
        except UnicodeDecodeError:  # perhaps UTF-16 or UTF-32, which json.loads detects
            import json

            return json.loads(raw)
    else:
        text = raw
    if text.startswith("\ufeff"):
        import json

        return json.loads(raw)  # json.loads refuses a BOM in a str; let it say so
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        end = -1
    if end < 0 or text[end:].strip(_WHITESPACE):
        import json

        return json.loads(raw)  # raises json's own error, with its position
    return value
