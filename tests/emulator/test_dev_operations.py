"""Every operation the emulator added, as a user of ``tokenrelay dev`` makes it: through the dev proxy,
which injects the API token (no Authorization header from the client)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tokenrelay.emulator.iam.access import ROLE_BY_NAME

from .test_commands import running

pytestmark = pytest.mark.e2e
IAM = "/iam/v2beta1"
VIEWER = ROLE_BY_NAME["viewer"].uid


async def test_every_new_operation_through_the_dev_proxy() -> None:
    """Identities and role bindings updated, custom roles, identity providers, account associations,
    group invites (accepted), repos and advisories: each operation answers through the proxy."""
    async with (
        running("dev", "--proxy-listen", "127.0.0.1:0", until="ready") as (_, found),
        aiohttp.ClientSession() as http,
    ):
        lines = {name: values[0] for name, values in found.items()}
        proxy, org, me = lines["proxy"], lines["organization"], lines["identity"]
        done: set[str] = set()

        async def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
            async with http.request(method, proxy + path, json=body) as r:
                answer = await r.json() if r.content_length else None
                assert r.status == 200, (method, path, answer)
                segments = path.split("?")[0].split("/")
                one = "/<uid>:accept" if path.endswith(":accept") else "/<uid>" if len(segments) > 4 else ""
                done.add(f"{method} {segments[3]}{one}")
                return answer

        groups = (await call("GET", f"{IAM}/groups?uidp.children_of={org}&name=team-a"))["groups"]
        team = groups[0]["uid"]
        identity = await call(
            "POST",
            f"{IAM}/identities/{team}",
            {
                "name": "ci",
                "claimMatch": {"issuer": "https://token.actions.githubusercontent.com", "subject": "r"},
            },
        )
        assert (await call("GET", f"{IAM}/identities/{identity['uid']}"))["name"] == "ci"
        assert (await call("GET", f"{IAM}/identities?uidp.descendants_of={org}"))["totalCount"] == "2"
        patched = await call(
            "PATCH", f"{IAM}/identities/{identity['uid']}?updateMask=description", {"description": "d"}
        )
        assert patched["description"] == "d"

        role = await call("POST", f"{IAM}/roles/{org}", {"name": "reader", "capabilities": ["repos.list"]})
        assert (await call("GET", f"{IAM}/roles/{role['uid']}"))["capabilities"] == ["repos.list"]
        assert (await call("GET", f"{IAM}/roles?name=reader"))["roles"] == [role]
        await call("PATCH", f"{IAM}/roles/{role['uid']}", {"description": "reads repos"})

        binding = await call(
            "POST", f"{IAM}/roleBindings/{team}", {"identityUid": identity["uid"], "roleUid": role["uid"]}
        )
        assert (await call("GET", f"{IAM}/roleBindings/{binding['uid']}"))["role"]["name"] == "reader"
        listed = await call("GET", f"{IAM}/roleBindings?identityUid={identity['uid']}")
        assert [b["uid"] for b in listed["roleBindings"]] == [binding["uid"]]
        assert (await call("PATCH", f"{IAM}/roleBindings/{binding['uid']}", {"roleUid": VIEWER}))["role"][
            "name"
        ] == "viewer"
        await call("DELETE", f"{IAM}/roleBindings/{binding['uid']}")
        await call("DELETE", f"{IAM}/identities/{identity['uid']}")
        await call("DELETE", f"{IAM}/roles/{role['uid']}")

        provider = await call(
            "POST",
            f"{IAM}/identityProviders/{org}",
            {"name": "gha", "oidc": {"issuer": "https://gha.example"}},
        )
        await call("GET", f"{IAM}/identityProviders/{provider['uid']}")
        await call("GET", f"{IAM}/identityProviders")
        await call("PATCH", f"{IAM}/identityProviders/{provider['uid']}", {"name": "github"})
        await call("DELETE", f"{IAM}/identityProviders/{provider['uid']}")

        association = await call(
            "POST", f"{IAM}/accountAssociations/{org}", {"google": {"projectId": "my-project"}}
        )
        await call("GET", f"{IAM}/accountAssociations/{association['uid']}")
        await call("GET", f"{IAM}/accountAssociations?uidp.children_of={org}")
        await call("PATCH", f"{IAM}/accountAssociations/{association['uid']}", {"name": "gcp"})
        await call("DELETE", f"{IAM}/accountAssociations/{association['uid']}")

        invite = await call("POST", f"{IAM}/groupInvites/{team}", {"roleUid": VIEWER, "singleUse": False})
        await call("GET", f"{IAM}/groupInvites/{invite['uid']}")
        await call("GET", f"{IAM}/groupInvites")
        await call("PATCH", f"{IAM}/groupInvites/{invite['uid']}", {"singleUse": True})
        joined = await call("POST", f"{IAM}/groupInvites/{invite['uid']}:accept", {"code": invite["code"]})
        assert (joined["identity"]["uid"], joined["group"]["uid"]) == (me, team)
        await call("POST", f"{IAM}/groupInvites/{team}", {"roleUid": VIEWER})
        second = (await call("GET", f"{IAM}/groupInvites"))["groupInvites"][0]
        await call("DELETE", f"{IAM}/groupInvites/{second['uid']}")

        repos = (await call("GET", "/registry/v2beta1/repos?name=web"))["repos"]
        await call("GET", f"/registry/v2beta1/repos/{repos[0]['uid']}")
        async with http.post(
            f"{lines['emulator']}/emulator/v1/advisories/{repos[0]['uid']}",
            json={"vulnerabilityId": "CVE-2026-7", "package": "openssl", "severity": "HIGH"},
        ) as r:
            assert r.status == 200
            advisory = await r.json()
        assert (await call("GET", "/vulnerabilities/v2beta1/advisories"))["advisories"] == [advisory]
        await call("GET", f"/vulnerabilities/v2beta1/advisories/{advisory['uid']}")
        crud = ["GET {}", "GET {}/<uid>", "POST {}/<uid>", "PATCH {}/<uid>", "DELETE {}/<uid>"]
        added = {
            *(
                op.format(kind)
                for op in crud
                for kind in ("roles", "identityProviders", "accountAssociations", "groupInvites")
            ),
            "PATCH identities/<uid>",
            "GET roleBindings/<uid>",
            "PATCH roleBindings/<uid>",
            "POST groupInvites/<uid>:accept",
            "GET advisories",
            "GET advisories/<uid>",
            "GET repos/<uid>",
        }
        assert added <= done, added - done
