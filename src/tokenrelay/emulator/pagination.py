"""``page_size``, ``page_token``, ``order_by`` and ``skip`` for every List endpoint.

Cursor (keyset) pagination: a page token holds the sort key of the last item served, so the next
page starts strictly after it and the order holds across pages even while resources come and go.
``skip`` positions the first page only; later pages follow the cursor (the response still echoes
``skip`` as ``skipped``). The token also records the query it belongs to and when it was issued: a
token older than three days restarts the query from the beginning, without an error, as documented.
Tokens are sealed (``pagetoken``): a client can neither read nor edit them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import IAM_DOMAIN, invalid_argument
from .inputs import whole_number
from .pagetoken import PageTokens, query_digest

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

    def envelope(self, key: str, render: Callable[[T], Mapping[str, Any]]) -> dict[str, Any]:
        """The document's list envelope: ``key``, ``nextPageToken`` (absent when last), ``totalCount``."""
        body: dict[str, Any] = {key: [render(item) for item in self.items]}
        if self.next_token:
            body["nextPageToken"] = self.next_token
        body["totalCount"] = str(self.total)
        body["skipped"] = self.skipped
        return body


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


PARAMETERS = frozenset({"page_size", "page_token", "order_by", "skip"})


def parse(query: Mapping[str, str], attributes: frozenset[str], domain: str = IAM_DOMAIN) -> PageRequest:
    """The pagination parameters of a List request; INVALID_ARGUMENT when malformed."""
    size = whole_number(query, "page_size", domain) or DEFAULT_PAGE_SIZE
    return PageRequest(
        size=min(size, MAX_PAGE_SIZE),
        token=query.get("page_token") or None,
        order=parse_order(query.get("order_by"), attributes),
        skip=whole_number(query, "skip", domain) or 0,
    )


def _cursor(payload: dict[str, Any], attribute_type: type) -> tuple[Any, str] | None:
    key = payload.get("k")
    if (
        isinstance(key, list)
        and len(key) == 2
        and isinstance(key[1], str)
        and type(key[0]) is attribute_type
        and isinstance(payload.get("t"), int)
    ):
        return key[0], key[1]
    return None


def paginate(
    items: Sequence[T],
    request: PageRequest,
    *,
    query_id: str,
    now: float,
    tokens: PageTokens,
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
        payload = tokens.open(request.token)
        if payload.get("q") != query_digest(query_id) or payload.get("o") != order.text:
            raise invalid_argument(
                "page_token", "belongs to another query: keep the filters and order_by of the first page"
            )
        sample = type(sort_key(ordered[0])[0]) if ordered else None
        cursor = _cursor(payload, sample) if sample is not None else None
        if now - float(payload.get("t", 0)) <= TOKEN_VALIDITY and sample is not None:
            if cursor is None:
                raise invalid_argument("page_token", "not a page token from this API")
            start = _first_after(ordered, sort_key, cursor, order.descending)
        # else: expired, so the query restarts from the beginning, as the document says
    page = ordered[start : start + request.size]
    next_token = ""
    if page and start + len(page) < len(ordered):
        next_token = tokens.seal(
            {"q": query_digest(query_id), "o": order.text, "k": list(sort_key(page[-1])), "t": int(now)}
        )
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
