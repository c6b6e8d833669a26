"""Pagination, ordering and skip over HTTP on the lists this emulator added: for random resources,
random page sizes, orders and skips, following nextPageToken yields exactly the ordered list."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenrelay.emulator import Emulator, api
from tokenrelay.emulator.iam import (
    account_associations,
    group_invites,
    groups,
    identities,
    identity_providers,
    role_bindings,
    roles,
)
from tokenrelay.emulator.iam.access import ROLE_BY_NAME
from tokenrelay.emulator.pagination import FIELD_ALIASES

from ..support.emulator import Wall
from .harness import SyncEmulator

VIEWER = ROLE_BY_NAME["viewer"].uid
RENDERED = {"uid": "uid", "name": "name", "create_ms": "createTime", "update_ms": "updateTime"}
Maker = Callable[[Emulator, str, str, int], object]  # (emulator, parent uid, name, index)


def _identity(e: Emulator, parent: str, name: str, i: int) -> str:
    claim = {"issuer": "https://i.example", "subject": f"s{i}"}
    return identities.create(e.resources, parent, {"name": name, "claimMatch": claim}).uid


MAKERS: dict[str, Maker] = {
    "identities": _identity,
    "roles": lambda e, p, n, i: roles.create(e.resources, p, {"name": n, "capabilities": ["groups.get"]}),
    "roleBindings": lambda e, p, n, i: role_bindings.create(
        e.resources, p, {"identityUid": _identity(e, p, n, i), "roleUid": VIEWER}
    ),
    "identityProviders": lambda e, p, n, i: identity_providers.create(
        e.resources, p, {"name": n, "oidc": {"issuer": "https://i.example"}}
    ),
    "accountAssociations": lambda e, p, n, i: account_associations.create(
        e.resources, p, {"name": n, "amazon": {"account": "123456789012"}}
    ),
    "groupInvites": lambda e, p, n, i: group_invites.create(e.resources, p, {"roleUid": VIEWER}),
    "advisories": lambda e, p, n, i: e.advisory(p, {"vulnerabilityId": f"CVE-2026-{i}", "package": n}),
}
KINDS = {kind.plural: kind for kind in api.KINDS}


class Lists:
    def __init__(self) -> None:
        self.wall = Wall()
        self.sync = SyncEmulator(Emulator(wall=self.wall))
        emulator = self.sync.emulator
        self.org = emulator.organization("acme")
        owner = emulator.workload(self.org.uid, "owner", role="owner").identity
        self.token = emulator.api_token(owner.uid, lifetime=7 * 86400)


@pytest.fixture(scope="module")
def lists() -> Iterator[Lists]:
    built = Lists()
    yield built
    built.sync.close()


@pytest.mark.parametrize("plural", sorted(MAKERS))
def test_pages_concatenate_to_the_ordered_list(lists: Lists, plural: str) -> None:
    """Pages follow order_by (ties by uid), honour skip and page_size, and neither repeat nor miss."""
    kind = KINDS[plural]
    fields = sorted(name for name, attribute in FIELD_ALIASES.items() if attribute in kind.order)

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        names=st.lists(st.sampled_from(["a", "b", "a b", "z"]), max_size=10),
        ticks=st.lists(st.sampled_from([0, 0, 1]), min_size=10, max_size=10),  # ties in time are common
        size=st.integers(1, 4),
        field=st.sampled_from(fields),
        descending=st.booleans(),
        skip=st.integers(0, 12),
    )
    def check(names: list[str], ticks: list[int], size: int, field: str, descending: bool, skip: int) -> None:
        emulator = lists.sync.emulator
        parent = groups.create(emulator.resources, lists.org.uid, {"name": "g"}).uid
        if plural == "advisories":
            parent = emulator.repo(parent, "r").uid
        for i, name in enumerate(names):
            lists.wall.advance(ticks[i] / 1000)
            MAKERS[plural](emulator, parent, name, i)
        path = kind.path
        status, everything = lists.sync.json(
            "GET", path, lists.token, params={"uidp.children_of": parent, "page_size": "200"}
        )
        assert status == 200, everything
        key = RENDERED[FIELD_ALIASES[field]]
        expected = sorted(everything[plural], key=lambda r: (r[key], r["uid"]), reverse=descending)
        params = {
            "uidp.children_of": parent,
            "page_size": str(size),
            "order_by": field + (" desc" if descending else ""),
            "skip": str(skip),
        }
        seen = []
        for _ in range(len(names) + 2):
            status, page = lists.sync.json("GET", path, lists.token, params=params)
            assert status == 200, page
            assert (page["totalCount"], page["skipped"]) == (str(len(names)), skip)
            assert len(page[plural]) <= size
            seen += page[plural]
            if "nextPageToken" not in page:
                break
            params["page_token"] = page["nextPageToken"]
        assert [r["uid"] for r in seen] == [r["uid"] for r in expected[skip:]]

    check()
