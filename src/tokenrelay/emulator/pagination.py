"""``page_size``, ``page_token``, ``order_by`` and ``skip`` for every List endpoint.

Cursor (keyset) pagination: a page token holds the sort key of the last item served, so the next
page starts strictly after it and the order holds across pages even while resources come and go.
``skip`` positions the first page only; later pages follow the cursor (the response still echoes
``skip`` as ``skipped``). The token also records the query it belongs to and when it was issued: a
token older than three days restarts the query from the beginning, without an error, as documented.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import invalid_argument

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200  # larger requests are lowered to this (AIP-158), not refused
TOKEN_VALIDITY = 3 * 24 * 3600.0

# order_by names accepted for each sort key; the document's examples use both forms.
FIELD_ALIASES: dict[str, str] = {
    "uid": "uid",
    "name": "name",
    "create_time": "create_ms",
    "createTime": "create_ms",
    "created_at": "create_ms",
    "update_time": "update_ms",
    "updateTime": "update_ms",
    "updated_at": "update_ms",
}

T = TypeVar("T")
SortKey = tuple[Any, str]


@dataclass(frozen=True, slots=True)
class Order:
    attribute: str  # the record attribute sorted on
    descending: bool

    @property
    def text(self) -> str:
        return self.attribute + (" desc" if self.descending else "")


@dataclass(frozen=True, slots=True)
class PageRequest:
    size: int
    token: str | None
    order: Order
    skip: int


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_token: str  # "" on the last page
    total: int
    skipped: int

    def envelope(self, key: str, render: Callable[[T], dict[str, Any]]) -> dict[str, Any]:
        """The document's list envelope: ``key``, ``nextPageToken`` (absent when last), ``totalCount``."""
        body: dict[str, Any] = {key: [render(item) for item in self.items]}
        if self.next_token:
            body["nextPageToken"] = self.next_token
        body["totalCount"] = str(self.total)
        body["skipped"] = self.skipped
        return body


def _non_negative_int(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise invalid_argument(name, f"{raw!r} is not a whole number") from None
    if value < 0:
        raise invalid_argument(name, "must not be negative")
    return value


def parse_order(text: str | None, attributes: frozenset[str]) -> Order:
    """``field`` or ``field desc`` (also ``field asc``); default ``uid`` ascending."""
    if not text or not text.strip():
        return Order("uid", descending=False)
    words = text.split()
    direction = words[1].lower() if len(words) == 2 else "asc"
    attribute = FIELD_ALIASES.get(words[0])
    if len(words) > 2 or direction not in ("asc", "desc") or attribute not in attributes:
        accepted = sorted(name for name, attr in FIELD_ALIASES.items() if attr in attributes)
        raise invalid_argument(
            "order_by", f"{text!r} is not one of {', '.join(accepted)}, optionally followed by ' desc'"
        )
    return Order(attribute, descending=direction == "desc")


def parse(query: Mapping[str, str], attributes: frozenset[str]) -> PageRequest:
    """The pagination parameters of a List request; INVALID_ARGUMENT when malformed."""
    size = _non_negative_int(query, "page_size") or DEFAULT_PAGE_SIZE
    return PageRequest(
        size=min(size, MAX_PAGE_SIZE),
        token=query.get("page_token") or None,
        order=parse_order(query.get("order_by"), attributes),
        skip=_non_negative_int(query, "skip") or 0,
    )


def _encode(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode(token: str) -> dict[str, Any]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise invalid_argument("page_token", "not a page token from this API") from None
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("k"), list)
        or len(payload["k"]) != 2
        or not isinstance(payload.get("t"), int | float)
    ):
        raise invalid_argument("page_token", "not a page token from this API")
    return payload


def paginate(
    items: Sequence[T],
    request: PageRequest,
    *,
    query_id: str,
    now: float,
) -> Page[T]:
    """One page of ``items`` (already filtered) in ``request.order``.

    ``query_id`` names the endpoint and its filters: a token only continues the query it came from.
    """
    order = request.order

    def sort_key(item: T) -> SortKey:
        return (getattr(item, order.attribute), getattr(item, "uid"))  # noqa: B009

    ordered = sorted(items, key=sort_key, reverse=order.descending)
    start = request.skip
    if request.token is not None:
        payload = _decode(request.token)
        if payload.get("q") != query_id or payload.get("o") != order.text:
            raise invalid_argument(
                "page_token", "belongs to another query: keep the filters and order_by of the first page"
            )
        if now - float(payload["t"]) <= TOKEN_VALIDITY:
            cursor = tuple(payload["k"])
            start = _first_after(ordered, sort_key, cursor, order.descending)
        # else: expired, so the query restarts from the beginning, as the document says
    page = ordered[start : start + request.size]
    next_token = ""
    if page and start + len(page) < len(ordered):
        next_token = _encode({"q": query_id, "o": order.text, "k": list(sort_key(page[-1])), "t": int(now)})
    return Page(page, next_token, len(ordered), request.skip)


def _first_after(ordered: Sequence[T], key: Callable[[T], SortKey], cursor: Any, descending: bool) -> int:
    """Index of the first item strictly past ``cursor`` in the list's direction."""
    for index, item in enumerate(ordered):
        item_key = key(item)
        try:
            past = item_key < cursor if descending else item_key > cursor
        except TypeError:
            raise invalid_argument("page_token", "not a page token from this API") from None
        if past:
            return index
    return len(ordered)
