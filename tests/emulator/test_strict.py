"""Strict like production: every refusal's exact body, for inputs a lenient emulator would let through."""

from __future__ import annotations

import string
from typing import Any

import pytest

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.emulator.errors import IAM_DOMAIN, REGISTRY_DOMAIN, STS_DOMAIN
from tokenrelay.emulator.iam import identities, role_bindings

from ..support.emulator import ERROR_INFO, PRECONDITION, World, invalid, simple

PAGINATED = "order_by, page_size, page_token, skip, uidp.children_of, uidp.descendants_of"
NUMBER = "must be a whole number from 0 to 2147483647, in plain digits"


async def test_unknown_and_repeated_query_parameters(world: World) -> None:
    """An unknown query parameter, or one given twice, is code 3 naming it."""
    status, error = await world.call("GET", "/registry/v2beta1/repos?colour=red&pageSize=2")
    assert status == 400
    accepted = f"this endpoint accepts: name, {PAGINATED}"
    assert error == invalid(
        [
            ("colour", f"unknown query parameter; {accepted}"),
            ("pageSize", f"unknown query parameter; {accepted}"),
        ],
        REGISTRY_DOMAIN,
    )
    status, error = await world.call("GET", f"/iam/v2beta1/groups/{world.org.uid}?view=full")
    assert error == invalid([("view", "unknown query parameter; this endpoint accepts: none")])
    status, error = await world.call("GET", "/iam/v2beta1/groups?skip=1&skip=2")
    assert error == invalid([("skip", "given more than once")])
    status, error = await world.call(
        "PATCH", f"/iam/v2beta1/groups/{world.org.uid}?updateMask=name&update_mask=description", json={}
    )
    assert error == invalid([("update_mask", "give updateMask or update_mask, not both")])


@pytest.mark.parametrize("value", ["1e3", "+5", " 5", "0x10", "2147483648", "99999999999999999999", "", "٣"])
async def test_malformed_numbers(world: World, value: str) -> None:
    """page_size that is not plain digits within int32 is code 3 naming page_size."""
    status, error = await world.call("GET", "/iam/v2beta1/groups", params={"page_size": value})
    assert (status, error) == (400, invalid([("page_size", NUMBER)]))


@pytest.mark.parametrize(
    "headers",
    [{"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"}, {}],
)
async def test_body_that_is_not_json_by_content_type(world: World, headers: dict[str, str]) -> None:
    """A body sent with any Content-Type but application/json is code 3 naming Content-Type."""
    status, error = await world.call(
        "POST", f"/iam/v2beta1/groups/{world.org.uid}", data=b'{"name": "x"}', headers=headers
    )
    assert (status, error) == (
        400,
        invalid([("Content-Type", "send the body as JSON with Content-Type: application/json")]),
    )


@pytest.mark.parametrize(
    ("raw", "description"),
    [
        (b'{"name": "a"' + b" " * 70000 + b"}", "larger than 65536 bytes"),
        (b'{"name": "a", "x": ' + b"[" * 17 + b"]" * 17 + b"}", "nested deeper than 16 levels"),
        (b'{"name": NaN}', "not JSON, or a number out of range"),
        (b'{"name": 1e999}', "not JSON, or a number out of range"),
        (b'{"name": ' + b"9" * 40 + b"}", "not JSON, or a number out of range"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[]", "must be a JSON object"),
    ],
)
async def test_bounded_bodies(world: World, raw: bytes, description: str) -> None:
    """Bodies too large, too deep, with non-finite or huge numbers, or not objects: code 3 naming body."""
    status, error = await world.call(
        "POST", f"/iam/v2beta1/groups/{world.org.uid}", data=raw, headers={"Content-Type": "application/json"}
    )
    assert (status, error) == (400, invalid([("body", description)]))


async def test_every_failing_field_is_listed(world: World) -> None:
    """fieldViolations lists all the failing fields, unknown ones included, not only the first."""
    status, error = await world.call(
        "POST",
        f"/iam/v2beta1/identities/{world.org.uid}",
        json={"name": 5, "colour": "red", "claimMatch": {"issuer": "ftp://x", "subject": ""}},
    )
    known = "claimMatch, createTime, description, lastSeenTime, name, uid, updateTime"
    assert (status, error) == (
        400,
        invalid(
            [
                ("colour", f"unknown field; known fields: {known}"),
                ("name", "must be a string"),
                (
                    "claimMatch.issuer",
                    "required: the URL of a token issuer (an http(s) URL of at most 2048 characters)",
                ),
                ("claimMatch.subject", "required"),
            ]
        ),
    )
    status, error = await world.call(
        "POST",
        f"/iam/v2beta1/roles/{world.org.uid}",
        json={"name": "Bad", "capabilities": ["groups.list", "fly"]},
    )
    assert [v["field"] for v in error["details"][1]["fieldViolations"]] == ["name", "capabilities[1]"]


async def test_routing_errors_have_the_full_shape(world: World) -> None:
    """An unknown path and a method a path lacks answer the same AIP-193 shape, with an ErrorInfo."""
    status, error = await world.call("GET", "/iam/v2beta1/nothing")
    assert (status, error) == (
        404,
        simple(5, "NOT_FOUND", "Not found: GET /iam/v2beta1/nothing: no such path in this API"),
    )
    async with world.http.put(f"{world.url}/registry/v2beta1/repos/x") as r:
        assert r.status == 405
        assert r.headers["Allow"] == "GET,HEAD"
        assert await r.json() == simple(
            12,
            "UNIMPLEMENTED",
            "Unimplemented: PUT /registry/v2beta1/repos/x: this path answers GET, HEAD",
            REGISTRY_DOMAIN,
        )


async def test_group_holding_role_bindings_is_not_deleted(world: World) -> None:
    """A group whose only children are role bindings is refused with 9 and a violation naming them."""
    team = world.group(world.org.uid, "team")
    identity = identities.create(
        world.emulator.resources,
        world.org.uid,
        {"claimMatch": {"issuer": "https://i.example", "subject": "t"}},
    )
    binding = role_bindings.create(
        world.emulator.resources,
        team.uid,
        {
            "identityUid": identity.uid,
            "roleUid": world.emulator.store.bindings_of(world.uids["viewer"]).__next__().role,
        },
    )
    status, error = await world.call("DELETE", f"/iam/v2beta1/groups/{team.uid}")
    assert (status, error) == (
        400,
        {
            "code": 9,
            "message": "Precondition failed: cannot delete group with child roleBindings",
            "details": [
                {"@type": ERROR_INFO, "reason": "FAILED_PRECONDITION", "domain": IAM_DOMAIN},
                {
                    "@type": PRECONDITION,
                    "violations": [
                        {
                            "type": "RESOURCE_NOT_EMPTY",
                            "subject": team.uid,
                            "description": f"group has 1 child roleBindings: {binding.uid}",
                        }
                    ],
                },
            ],
        },
    )
    assert binding.uid in world.emulator.store.role_bindings


async def test_page_tokens_are_sealed(world: World) -> None:
    """Forged, truncated, edited and other emulators' page tokens are code 3, never 500; another query's
    token is refused by name."""
    for name in "abc":
        world.group(world.org.uid, name)
    params = {"uidp.children_of": world.org.uid, "page_size": "1"}
    _, first = await world.call("GET", "/iam/v2beta1/groups", params=params)
    token = first["nextPageToken"]
    async with EmulatorServer(Emulator()) as other:
        other.emulator.organization("o")
        foreign_org = other.emulator.organization("p")
        other.emulator.workload(foreign_org.uid, "s")
        foreign = other.emulator.page_tokens.seal({"q": "x", "o": "uid", "k": ["a", "b"], "t": 0})
    edited = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    not_ours = invalid([("page_token", "not a page token from this API (pass nextPageToken unchanged)")])
    for bad in ("eyJrIjpbXX0", token[:20], token[:-1], edited, foreign, "%%%", "x" * 2000):
        status, error = await world.call("GET", "/iam/v2beta1/groups", params={**params, "page_token": bad})
        assert (status, error) == (400, not_ours), bad[:30]
    status, error = await world.call(
        "GET", "/iam/v2beta1/groups", params={**params, "order_by": "name", "page_token": token}
    )
    assert error == invalid(
        [("page_token", "belongs to another query: keep the filters and order_by of the first page")]
    )
    status, second = await world.call("GET", "/iam/v2beta1/groups", params={**params, "page_token": token})
    assert status == 200
    assert second["groups"][0]["uid"] > first["groups"][0]["uid"]


async def test_page_tokens_in_another_spelling_of_the_same_bytes_are_refused(world: World) -> None:
    """A page token whose last character's unused bits were changed, padded, or with characters a lenient
    base64 decoder skips is refused as a forged one is (code 3); the token as given works."""
    for name in ("abc", "d"):  # the first name's length makes the token's length one with trailing bits
        world.group(world.org.uid, name)
    params = {"uidp.children_of": world.org.uid, "page_size": "1", "order_by": "name"}
    _, first = await world.call("GET", "/iam/v2beta1/groups", params=params)
    token = first["nextPageToken"]
    assert len(token) % 4 in (2, 3), len(token)  # precondition: the last character carries unused bits
    alphabet = string.ascii_letters + string.digits + "-_"
    last = alphabet.index(token[-1])
    unused = 4 if len(token) % 4 == 2 else 2
    same_bytes = alphabet[last ^ ((1 << unused) - 1)]  # the same bytes, other trailing bits
    not_ours = invalid([("page_token", "not a page token from this API (pass nextPageToken unchanged)")])
    for other in (token[:-1] + same_bytes, token + "=" * (-len(token) % 4), token[:8] + "...." + token[8:]):
        status, error = await world.call("GET", "/iam/v2beta1/groups", params={**params, "page_token": other})
        assert (status, error) == (400, not_ours), other
    status, _ = await world.call("GET", "/iam/v2beta1/groups", params={**params, "page_token": token})
    assert status == 200


async def exchange(world: World, oidc: str, identity: str, **extra: str) -> tuple[int, Any]:
    params = {"aud": world.url, "identity": identity, **extra}
    async with world.http.get(
        world.url + "/sts/exchange", params=params, headers={"Authorization": f"Bearer {oidc}"}
    ) as r:
        return r.status, await r.json()


async def test_exchange_checks_the_oidc_tokens_audience(world: World) -> None:
    """An OIDC token whose aud is not the emulator's URL is refused with 16, naming the aud claim."""
    status, error = await exchange(
        world, world.emulator.mint("sub-owner", "https://elsewhere.example"), world.uids["owner"]
    )
    assert (status, error) == (
        401,
        simple(
            16,
            "UNAUTHENTICATED",
            "Unauthenticated: the OIDC token has an aud claim that does not name this token service; "
            f"expected audience: {world.url}",
            STS_DOMAIN,
            claim="aud",
        ),
    )
    status, _ = await exchange(world, world.emulator.mint("sub-owner", world.url + "/"), world.uids["owner"])
    assert status == 200  # the emulator's URL, with or without the trailing slash


async def test_exchange_names_the_claim_that_does_not_match(world: World) -> None:
    """A token whose sub is not the identity's claimMatch.subject is refused naming sub."""
    status, error = await exchange(world, world.emulator.mint("sub-viewer"), world.uids["owner"])
    assert (status, error) == (
        403,
        simple(
            7,
            "PERMISSION_DENIED",
            "Permission denied: the OIDC token's sub claim is not the claimMatch.subject of identity "
            f"{world.uids['owner']}",
            STS_DOMAIN,
            claim="sub",
        ),
    )
    other = identities.create(
        world.emulator.resources,
        world.org.uid,
        {"claimMatch": {"issuer": "https://other.example", "subject": "sub-owner"}},
    )
    status, error = await exchange(world, world.emulator.mint("sub-owner"), other.uid)
    assert error["details"][0]["metadata"] == {"claim": "iss"}
    status, error = await exchange(world, world.emulator.mint("sub-owner"), world.uids["owner"], scope="x")
    assert (status, error) == (
        400,
        invalid([("scope", "unknown query parameter; this endpoint accepts: aud, identity")], STS_DOMAIN),
    )


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=nope"]
)
async def test_exchange_form_that_does_not_decode(world: World, content_type: str) -> None:
    """A form body in bytes that do not decode is code 3 naming body (the property hunt found a 500)."""
    async with world.http.post(
        world.url + "/sts/exchange", data=b"aud=\x80", headers={"Content-Type": content_type}
    ) as r:
        assert (r.status, await r.json()) == (
            400,
            invalid([("body", "not a URL-encoded form in UTF-8")], STS_DOMAIN),
        )
    async with world.http.post(
        world.url + "/sts/exchange", data=b'{"aud": "x"}', headers={"Content-Type": "application/json"}
    ) as r:
        assert await r.json() == invalid(
            [("Content-Type", "send aud and identity in the query, or as application/x-www-form-urlencoded")],
            STS_DOMAIN,
        )
