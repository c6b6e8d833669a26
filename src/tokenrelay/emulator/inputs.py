"""What a request may carry, bounded: query parameters, whole numbers, JSON bodies, field values.

Production refuses what a client should not send, so the emulator does too (code 3 naming the
parameter or field) rather than guessing: an unknown query parameter, a number that is not plain
digits, a body that is not ``application/json``, one too large or nested too deep. ``Fields``
checks a body's fields and collects every violation before refusing, so a client learns all its
mistakes at once (the document: ``fieldViolations`` names exactly which fields failed).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from aiohttp import web

from ..lite.timestamps import parse_timestamp
from .errors import NAME_PATTERN_RULE, invalid_argument, invalid_arguments

MAX_BODY = 64 * 1024
MAX_DEPTH = 16
MAX_QUERY_VALUE = 2048
MAX_INT = 2**31 - 1  # the proto int32 of page_size and skip
MAX_JSON_INT_DIGITS = 18
MAX_NAME = 128
MAX_SUBJECT = 1024  # a claim's subject; also any uid a body names
MAX_TEXT = 2048  # descriptions, summaries
MAX_URL = 2048
MAX_LIST = 64
_DIGITS = re.compile(r"[0-9]{1,10}")
NAME_PATTERN = re.compile(r"[a-z0-9 ._-]+")  # the document's ^[a-z0-9 ._-]{1,}$, matched in full


def check_query(request: web.Request, allowed: Collection[str], domain: str) -> dict[str, str]:
    """The query as a dict; code 3 for a parameter not in ``allowed``, given twice, or too long."""
    query = request.query
    violations: list[tuple[str, str]] = []
    for name in sorted(set(query)):
        if name not in allowed:
            accepted = ", ".join(sorted(allowed)) or "none"
            violations.append((name, f"unknown query parameter; this endpoint accepts: {accepted}"))
        elif len(query.getall(name)) > 1:
            violations.append((name, "given more than once"))
        elif len(query[name]) > MAX_QUERY_VALUE:
            violations.append((name, f"longer than {MAX_QUERY_VALUE} characters"))
    if violations:
        raise invalid_arguments(violations, domain)
    return dict(query)


def whole_number(query: Mapping[str, str], name: str, domain: str) -> int | None:
    """A query integer: plain decimal digits, 0 to 2147483647; None when absent."""
    raw = query.get(name)
    if raw is None:
        return None
    if _DIGITS.fullmatch(raw) is None or int(raw) > MAX_INT:
        raise invalid_argument(name, f"must be a whole number from 0 to {MAX_INT}, in plain digits", domain)
    return int(raw)


def _depth(raw: str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_INT_DIGITS:
        raise ValueError("integer out of range")
    return int(text)


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def decode_json(raw: bytes, domain: str) -> dict[str, Any]:
    """A bounded JSON object from ``raw``; code 3 naming ``body`` otherwise."""
    if len(raw) > MAX_BODY:
        raise invalid_argument("body", f"larger than {MAX_BODY} bytes", domain)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid_argument("body", "not UTF-8", domain) from None
    if _depth(text) > MAX_DEPTH:
        raise invalid_argument("body", f"nested deeper than {MAX_DEPTH} levels", domain)
    try:
        body = json.loads(text, parse_float=_number, parse_int=_integer, parse_constant=_constant)
    except ValueError:
        raise invalid_argument("body", "not JSON, or a number out of range", domain) from None
    if not isinstance(body, dict):
        raise invalid_argument("body", "must be a JSON object", domain)
    return body


async def json_body(request: web.Request, domain: str) -> dict[str, Any]:
    """The request's JSON object: ``Content-Type: application/json`` (UTF-8), at most 64 KiB."""
    charset = (request.charset or "utf-8").lower()
    if request.content_type != "application/json" or charset not in ("utf-8", "utf8"):
        raise invalid_argument(
            "Content-Type", "send the body as JSON with Content-Type: application/json", domain
        )
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise invalid_argument("body", f"larger than {MAX_BODY} bytes", domain)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise invalid_argument("body", f"larger than {MAX_BODY} bytes", domain) from None
    return decode_json(raw, domain)


class Fields:
    """Reads fields of a JSON object and collects what is wrong with them; ``check()`` refuses with all.

    ``known`` are the field names the resource has (input and output); any other key is a violation.
    """

    def __init__(
        self,
        body: Mapping[str, Any],
        known: Iterable[str],
        domain: str,
        *,
        prefix: str = "",
        violations: list[tuple[str, str]] | None = None,
    ) -> None:
        self.body = body
        self.domain = domain
        self.prefix = prefix
        self.violations: list[tuple[str, str]] = [] if violations is None else violations
        known_set = set(known)
        for key in body:
            if key not in known_set:
                self.add(key, f"unknown field; known fields: {', '.join(sorted(known_set))}")

    def add(self, field: str, description: str) -> None:
        self.violations.append((self.prefix + field, description))

    def check(self) -> None:
        if self.violations:
            raise invalid_arguments(self.violations, self.domain)

    def text(self, field: str, *, required: bool = False, limit: int = MAX_TEXT) -> str:
        value = self.body.get(field, "")
        if not isinstance(value, str):
            self.add(field, "must be a string")
            return ""
        if required and not value:
            self.add(field, "required")
        elif len(value) > limit:
            self.add(field, f"longer than {limit} characters")
        return str(value)

    def name(self, field: str = "name") -> str:
        value = self.body.get(field)
        if not isinstance(value, str) or len(value) > MAX_NAME or NAME_PATTERN.fullmatch(value) is None:
            rule = NAME_PATTERN_RULE + (f", at most {MAX_NAME} characters" if isinstance(value, str) else "")
            self.add(field, rule)
            return ""
        return value

    def url(self, field: str, what: str) -> str:
        value = self.body.get(field)
        if (
            not isinstance(value, str)
            or not value.startswith(("https://", "http://"))
            or len(value) > MAX_URL
            or any(c.isspace() for c in value)
        ):
            self.add(field, f"required: {what} (an http(s) URL of at most {MAX_URL} characters)")
            return ""
        return value

    def pattern(self, field: str, regex: re.Pattern[str], what: str, *, required: bool = True) -> str:
        value = self.body.get(field)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or regex.fullmatch(value) is None:
            self.add(field, f"{'required: ' if required else ''}{what}")
            return ""
        return value

    def boolean(self, field: str, default: bool) -> bool:
        value = self.body.get(field, default)
        if not isinstance(value, bool):
            self.add(field, "must be true or false")
            return default
        return value

    def timestamp_ms(self, field: str) -> int | None:
        """Milliseconds since the epoch of an ISO 8601 UTC timestamp; None when absent."""
        value = self.body.get(field)
        if value is None:
            return None
        if isinstance(value, str) and len(value) <= 40:
            try:
                seconds = parse_timestamp(value)
            except (ValueError, OverflowError):
                pass
            else:
                return int(seconds * 1000)
        self.add(field, "must be a timestamp like 2026-01-02T03:04:05.000Z")
        return None

    def strings(self, field: str, *, limit: int = MAX_NAME) -> tuple[str, ...]:
        value = self.body.get(field, [])
        if (
            not isinstance(value, list)
            or len(value) > MAX_LIST
            or not all(isinstance(v, str) and 0 < len(v) <= limit for v in value)
        ):
            self.add(
                field, f"must be a list of at most {MAX_LIST} non-empty strings of at most {limit} characters"
            )
            return ()
        return tuple(value)

    def nested(self, field: str, known: Iterable[str], *, required: bool) -> Fields | None:
        """The checker of an object-valued field, sharing this one's violations; None when absent."""
        value = self.body.get(field)
        if value is None and not required:
            return None
        if not isinstance(value, Mapping):
            self.add(
                field, f"required: an object with {', '.join(known)}" if required else "must be an object"
            )
            return Fields({}, known, self.domain, prefix=f"{self.prefix}{field}.", violations=[])
        return Fields(value, known, self.domain, prefix=f"{self.prefix}{field}.", violations=self.violations)
