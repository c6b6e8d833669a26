"""No request can make the emulator answer 500: hypothesis hunts across paths, methods, queries,
bodies, content types and credentials; every refusal it finds has the full AIP-193 shape."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, NamedTuple
from urllib.parse import quote

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

from .harness import SyncEmulator

QUERY_NAMES = [
    "page_size",
    "page_token",
    "order_by",
    "skip",
    "uidp.descendants_of",
    "uidp.children_of",
    "name",
    "updateMask",
    "update_mask",
    "identityUid",
    "roleUid",
    "vulnerabilityId",
    "aud",
    "identity",
    "id",
    "x",
]
FIELD_NAMES = [
    "name",
    "description",
    "claimMatch",
    "issuer",
    "subject",
    "identityUid",
    "roleUid",
    "capabilities",
    "oidc",
    "amazon",
    "google",
    "azure",
    "account",
    "projectId",
    "expireTime",
    "singleUse",
    "code",
    "sub",
    "aud",
    "lifetime",
    "vulnerabilityId",
    "package",
    "severity",
    "status",
    "aliases",
    "uid",
]


class World:
    """An emulator and, per example, a fresh organization with one resource of every kind (an example
    may delete what it targets: the next one starts from a full set again)."""

    def __init__(self) -> None:
        self.sync = SyncEmulator(Emulator())
        self.operations = operations()
        self.seed()

    def seed(self) -> None:
        emulator = self.sync.emulator
        org = emulator.organization("acme")
        team = groups.create(emulator.resources, org.uid, {"name": "team"})
        owner = emulator.workload(org.uid, "owner", role="owner").identity
        viewer = emulator.workload(team.uid, "viewer", role="viewer").identity
        repo = emulator.repo(team.uid, "web")
        advisory = emulator.advisory(repo.uid, {"vulnerabilityId": "CVE-1", "package": "p"})
        role = roles.create(emulator.resources, team.uid, {"name": "r", "capabilities": ["groups.get"]})
        invite, self.code = group_invites.create(emulator.resources, team.uid, {"roleUid": role.uid})
        provider = identity_providers.create(
            emulator.resources, team.uid, {"name": "p", "oidc": {"issuer": "https://i.x"}}
        )
        association = account_associations.create(
            emulator.resources, team.uid, {"amazon": {"account": "123456789012"}}
        )
        binding = next(emulator.store.bindings_of(viewer.uid))
        self.uids = [
            org.uid,
            team.uid,
            owner.uid,
            viewer.uid,
            repo.uid,
            advisory.uid,
            role.uid,
            invite.uid,
            provider.uid,
            association.uid,
            binding.uid,
            ROLE_BY_NAME["viewer"].uid,
        ]
        self.tokens = [
            emulator.api_token(owner.uid),
            emulator.api_token(viewer.uid),
            emulator.mint("owner"),
            "garbage",
        ]
        _, body, _ = self.sync.request("GET", "/iam/v2beta1/groups?page_size=1", token=self.tokens[0])
        self.page_token = json.loads(body)["nextPageToken"]
        self.parents = [team.uid, org.uid, repo.uid]
        self.by_kind = {
            "/iam/v2beta1/groups/": [org.uid, team.uid],
            "/iam/v2beta1/identities/": [owner.uid, viewer.uid],
            "/iam/v2beta1/roles/": [role.uid, ROLE_BY_NAME["viewer"].uid],
            "/iam/v2beta1/roleBindings/": [binding.uid],
            "/iam/v2beta1/identityProviders/": [provider.uid],
            "/iam/v2beta1/accountAssociations/": [association.uid],
            "/iam/v2beta1/groupInvites/": [invite.uid],
            "/registry/v2beta1/repos/": [repo.uid],
            "/vulnerabilities/v2beta1/advisories/": [advisory.uid],
        }

    def uids_for(self, method: str, prefix: str, suffix: str) -> list[str]:
        """The uids an operation is meant for: a parent for a create, else a resource of its kind."""
        if prefix not in self.by_kind or (method == "POST" and not suffix):
            return self.parents
        return self.by_kind[prefix]


def operations() -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """Every route: (method, path template, body fields, query parameters); the kinds' from api.KINDS."""
    known = {
        "groups": groups.KNOWN,
        "identities": (*identities.KNOWN, "issuer", "subject"),
        "roles": roles.KNOWN,
        "roleBindings": role_bindings.KNOWN,
        "identityProviders": (*identity_providers.KNOWN, "issuer"),
        "accountAssociations": (*account_associations.KNOWN, "account", "projectId", "tenantId"),
        "groupInvites": group_invites.KNOWN,
    }
    found: list[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = []
    for kind in api.KINDS:
        fields = tuple(known.get(kind.plural, ()))
        listing = ("page_size", "page_token", "order_by", "skip", "uidp.descendants_of", "uidp.children_of")
        found.append(("GET", kind.path, (), (*listing, *kind.filters)))
        found.append(("GET", kind.path + "/{uid}", (), ()))
        if kind.create:
            found.append(("POST", kind.path + "/{uid}", fields, ()))
        if kind.update:
            found.append(("PATCH", kind.path + "/{uid}", fields, ("updateMask",)))
        if kind.delete:
            found.append(("DELETE", kind.path + "/{uid}", (), ()))
    return [
        *found,
        ("POST", "/iam/v2beta1/groupInvites/{uid}:accept", ("code",), ()),
        ("GET", "/sts/exchange", (), ("aud", "identity")),
        ("POST", "/sts/exchange", ("aud", "identity"), ("aud", "identity")),
        ("POST", "/emulator/v1/mint", ("sub", "aud", "lifetime"), ()),
        (
            "POST",
            "/emulator/v1/advisories/{uid}",
            ("vulnerabilityId", "package", "severity", "status", "aliases"),
            (),
        ),
        ("GET", "/iam/v1/groups", (), ("id",)),
        ("GET", "/registry/v1/repos", (), ("id",)),
        ("GET", "/.well-known/jwks.json", (), ()),
        ("GET", "/registry/v2beta1/tags", (), ()),
    ]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    built = World()
    yield built
    built.sync.close()


class Ref(NamedTuple):
    """A value resolved against the example's seed: a uid, the invite code, a page token (or a cut one)."""

    kind: str
    pick: int


class Slot(NamedTuple):
    """The n-th of the operation's own names (its body fields or query parameters)."""

    n: int


def often(likely: st.SearchStrategy[Any], rest: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``likely`` four times in five: mostly well-formed requests reach the rules behind the checks."""
    return st.one_of(likely, likely, likely, likely, rest)


# Built once: placeholders (Ref, Slot) keep the strategies independent of each example's fresh seed.
text = st.text(st.characters(codec="utf-8"), max_size=12)
refs = st.builds(Ref, st.sampled_from(["uid", "uid", "code", "page_token", "cut_token"]), st.integers(0, 63))
slots = st.builds(Slot, st.integers(0, 63))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), text, refs
)
keys = often(slots, st.sampled_from(FIELD_NAMES) | text)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
query_values = st.one_of(
    text,
    st.integers(-5, 2**40).map(str),
    refs,
    st.sampled_from(["name desc", "create_time", "uid asc", "name,description", "claimMatch.subject", "1e3"]),
)
REQUESTS = st.fixed_dictionaries(
    {
        "op": st.integers(0, 10_000),
        "uid": often(st.integers(0, 63), text),
        "tail": often(st.just(""), text),
        "method": often(st.none(), st.sampled_from(["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD"])),
        "params": often(
            st.dictionaries(slots, query_values, max_size=3),
            st.dictionaries(st.sampled_from(QUERY_NAMES) | text, query_values, max_size=3),
        ),
        "body": often(
            st.dictionaries(keys, json_values, max_size=5),
            st.one_of(st.none(), json_values, st.binary(max_size=64)),
        ),
        "content_type": often(
            st.just("application/json"),
            st.sampled_from(
                [None, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"]
            ),
        ),
        "token": often(st.just(0), st.integers(0, len(["owner", "viewer", "oidc", "garbage", "none"]) - 1)),
    }
)


def resolve(world: World, value: Any, names: tuple[str, ...]) -> Any:
    """``value`` with its placeholders replaced for this example (Slot names dropped if it has none)."""
    if isinstance(value, Ref):
        picks = {
            "uid": world.uids,
            "code": [world.code],
            "page_token": [world.page_token],
            "cut_token": [world.page_token[:-2]],
        }[value.kind]
        return picks[value.pick % len(picks)]
    if isinstance(value, Slot):
        return names[value.n % len(names)] if names else None
    if isinstance(value, list):
        return [resolve(world, v, names) for v in value]
    if isinstance(value, dict):
        resolved = {resolve(world, k, names): resolve(world, v, names) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if k is not None}
    return value


def build(world: World, drawn: dict[str, Any]) -> dict[str, Any]:
    method, template, fields, query_names = world.operations[drawn["op"] % len(world.operations)]
    prefix, _, suffix = template.partition("{uid}")
    if "{uid}" in template:
        own = world.uids_for(method, prefix, suffix)
        uid = own[drawn["uid"] % len(own)] if isinstance(drawn["uid"], int) else drawn["uid"]
        path = prefix + uid + suffix
    else:
        path = template + drawn["tail"]
    body = drawn["body"]
    if not isinstance(body, bytes):
        body = None if body is None else json.dumps(resolve(world, body, fields)).encode()
    params = {str(k): str(v) for k, v in resolve(world, drawn["params"], query_names).items()}
    token = drawn["token"]
    return {
        "method": drawn["method"] or method,
        "path": quote(path, safe="/:"),
        "params": params,
        "data": body,
        "headers": {"Content-Type": drawn["content_type"]} if drawn["content_type"] else {},
        "token": world.tokens[token] if token < len(world.tokens) else None,
    }


EXAMPLES = int(os.environ.get("TOKENRELAY_HUNT_EXAMPLES", "400"))  # raise it for a longer hunt


def test_no_request_answers_500(world: World) -> None:
    """Across generated requests nothing answers 5xx, and every 4xx has code, message and an ErrorInfo."""

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(REQUESTS)
    def hunt(drawn: dict[str, Any]) -> None:
        world.seed()
        request = build(world, drawn)
        status, body, _ = world.sync.request(
            request["method"],
            request["path"],
            token=request["token"],
            params=request["params"],
            data=request["data"],
            headers=request["headers"],
        )
        assert status < 500, (request, status, body[:300])
        if status >= 400 and request["method"] != "HEAD":
            error = json.loads(body)
            assert set(error) == {"code", "message", "details"}, error
            assert isinstance(error["code"], int) and error["message"]
            assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo", error

    hunt()
