"""Pagination, ordering and skipping: properties over random data, and the HTTP parameters."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenrelay.emulator import pagination
from tokenrelay.emulator.errors import ApiError
from tokenrelay.emulator.pagetoken import PageTokens
from tokenrelay.emulator.pagination import FIELD_ALIASES, MAX_PAGE_SIZE, PageRequest

from ..support.emulator import World

ATTRIBUTES = frozenset({"uid", "name", "create_ms", "update_ms"})
NOW = 2_000_000_000.0
TOKENS = PageTokens(bytes(range(32)))


@dataclass(frozen=True)
class Item:
    uid: str
    name: str
    create_ms: int
    update_ms: int


# Few distinct names and times, so that ties (which the cursor must break by uid) are common.
items_strategy = st.lists(
    st.builds(
        Item,
        uid=st.text("abcdef0123", min_size=1, max_size=6),
        name=st.sampled_from(["a", "b", "c", "a b", "z"]),
        create_ms=st.integers(0, 3),
        update_ms=st.integers(0, 3),
    ),
    max_size=40,
    unique_by=lambda item: item.uid,
)


def expected_order(items: list[Item], attribute: str, descending: bool) -> list[Item]:
    return sorted(items, key=lambda i: (getattr(i, attribute), i.uid), reverse=descending)


@settings(max_examples=150, deadline=None)
@given(
    items=items_strategy,
    size=st.integers(1, 12),
    field=st.sampled_from(sorted(FIELD_ALIASES)),
    descending=st.booleans(),
    skip=st.integers(0, 45),
)
def test_pages_concatenate_to_the_ordered_list(
    items: list[Item], size: int, field: str, descending: bool, skip: int
) -> None:
    """Following nextPageToken yields exactly the ordered list after skip: no duplicate, no gap."""
    order_by = field + (" desc" if descending else "")
    seen: list[Item] = []
    token: str | None = None
    pages = 0
    while True:
        query = {"page_size": str(size), "order_by": order_by, "skip": str(skip)}
        if token:
            query["page_token"] = token
        page = pagination.paginate(
            items, pagination.parse(query, ATTRIBUTES), query_id="q", now=NOW, tokens=TOKENS
        )
        assert page.total == len(items)
        assert page.skipped == skip
        assert len(page.items) <= size
        seen.extend(page.items)
        pages += 1
        assert pages <= len(items) + 1
        if not page.next_token:
            break
        token = page.next_token
    attribute = FIELD_ALIASES[field]
    assert seen == expected_order(items, attribute, descending)[skip:]


@settings(max_examples=60, deadline=None)
@given(items=items_strategy, size=st.integers(1, 5), inserted=items_strategy)
def test_order_holds_while_items_are_added_between_pages(
    items: list[Item], size: int, inserted: list[Item]
) -> None:
    """Items added after the first page never make an earlier item come back (the cursor holds)."""
    request = PageRequest(size, None, pagination.Order("name", descending=False), 0)
    first = pagination.paginate(items, request, query_id="q", now=NOW, tokens=TOKENS)
    if not first.next_token:
        return
    grown = items + [i for i in inserted if i.uid not in {x.uid for x in items}]
    following = PageRequest(len(grown), first.next_token, request.order, 0)
    rest = pagination.paginate(grown, following, query_id="q", now=NOW, tokens=TOKENS)
    last = (first.items[-1].name, first.items[-1].uid)
    assert all((i.name, i.uid) > last for i in rest.items)
    assert not {i.uid for i in rest.items} & {i.uid for i in first.items}


def test_page_size_defaults_and_caps() -> None:
    """page_size defaults to 50 (also for 0) and is lowered to 200 above that."""
    assert pagination.parse({}, ATTRIBUTES).size == 50
    assert pagination.parse({"page_size": "0"}, ATTRIBUTES).size == 50
    assert pagination.parse({"page_size": "5000"}, ATTRIBUTES).size == MAX_PAGE_SIZE


@pytest.mark.parametrize(
    "query",
    [
        {"page_size": "-1"},
        {"page_size": "ten"},
        {"skip": "-3"},
        {"order_by": "colour"},
        {"order_by": "name sideways"},
        {"order_by": "name desc extra"},
    ],
)
def test_malformed_parameters_are_invalid_argument(query: dict[str, str]) -> None:
    """A malformed page_size, skip or order_by is refused with code 3."""
    with pytest.raises(ApiError) as caught:
        pagination.parse(query, ATTRIBUTES)
    assert caught.value.code == 3


async def test_http_paging_with_the_documents_order_examples(world: World) -> None:
    """order_by name, name desc and created_at desc page through groups in that order over HTTP."""
    for i, name in enumerate(["delta", "alpha", "charlie", "bravo", "echo"]):
        world.clock.jump_wall(0.001 * (i + 1))
        world.group(world.org.uid, name)
    expected = {
        "name": ["alpha", "bravo", "charlie", "delta", "echo"],
        "name desc": ["echo", "delta", "charlie", "bravo", "alpha"],
        "created_at desc": ["echo", "bravo", "charlie", "alpha", "delta"],
    }
    for order_by, names in expected.items():
        got: list[str] = []
        params = {"uidp.children_of": world.org.uid, "order_by": order_by, "page_size": "2"}
        while True:
            status, body = await world.call("GET", "/iam/v2beta1/groups", params=params)
            assert status == 200, body
            assert body["totalCount"] == "5"
            got += [g["name"] for g in body["groups"]]
            if not body.get("nextPageToken"):
                break
            params["page_token"] = body["nextPageToken"]
        assert got == names, order_by


async def test_page_token_older_than_three_days_restarts(world: World) -> None:
    """A page token past its 3 days restarts from the beginning without an error."""
    for name in "abc":
        world.group(world.org.uid, name)
    params = {"uidp.children_of": world.org.uid, "order_by": "name", "page_size": "1"}
    _, first = await world.call("GET", "/iam/v2beta1/groups", params=params)
    params["page_token"] = first["nextPageToken"]
    _, second = await world.call("GET", "/iam/v2beta1/groups", params=params)
    assert [g["name"] for g in second["groups"]] == ["b"]
    world.clock.jump_wall(3 * 86400 + 1)
    world.tokens["owner"] = world.emulator.api_token(world.uids["owner"])  # the old one expired too
    status, restarted = await world.call("GET", "/iam/v2beta1/groups", params=params)
    assert status == 200
    assert [g["name"] for g in restarted["groups"]] == ["a"]


async def test_page_token_of_another_query_is_refused(world: World) -> None:
    """A page token used with other filters or another order gets code 3."""
    for name in "ab":
        world.group(world.org.uid, name)
    params = {"uidp.children_of": world.org.uid, "page_size": "1"}
    _, first = await world.call("GET", "/iam/v2beta1/groups", params=params)
    for changed in ({"order_by": "name desc"}, {"name": "a"}):
        status, error = await world.call(
            "GET", "/iam/v2beta1/groups", params={**params, **changed, "page_token": first["nextPageToken"]}
        )
        assert (status, error["code"]) == (400, 3), changed
    status, error = await world.call("GET", "/iam/v2beta1/groups", params={"page_token": "%%%"})
    assert (status, error["code"]) == (400, 3)


async def test_page_size_over_the_maximum_is_lowered(world: World) -> None:
    """page_size=1000 returns at most 200 results and a token for the rest."""
    for i in range(205):
        world.group(world.org.uid, f"g{i}")
    status, body = await world.call(
        "GET", "/iam/v2beta1/groups", params={"uidp.children_of": world.org.uid, "page_size": "1000"}
    )
    assert status == 200
    assert len(body["groups"]) == 200
    assert body["totalCount"] == "205"
    assert body["nextPageToken"]
