"""--state FILE: a restart keeps resources and keys, so earlier tokens stay valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tokenrelay.emulator import Emulator, EmulatorServer, Store
from tokenrelay.emulator.iam import account_associations, group_invites, groups, identity_providers, roles
from tokenrelay.emulator.seed import seed


async def test_restart_keeps_resources_and_tokens(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """Resources of every kind survive a restart, and an API token and a page token issued before it are
    accepted after it."""
    state = str(tmp_path / "state.db")
    store = Store(state)
    async with EmulatorServer(Emulator(store), port=0) as first:
        seeded = seed(first.emulator)
        owner = seeded.identities["owner"]
        port = int(first.url.rsplit(":", 1)[1])
        token = first.emulator.api_token(owner.uid)
        groups_before = {uid: g.v2() for uid, g in store.groups.items()}
        patched = next(g for g in store.groups.values() if g.name == "apps")
        groups.patch(first.emulator.resources, patched.uid, {"description": "changed"}, None)
        res = first.emulator.resources
        org = seeded.organization.uid
        role = roles.create(res, org, {"name": "r", "capabilities": ["groups.get"]})
        invite, code = group_invites.create(res, org, {"roleUid": role.uid})
        kept: dict[str, Any] = {
            "role": role.v2(),
            "invite": group_invites.render(res, invite),
            "provider": identity_providers.create(
                res, org, {"name": "p", "oidc": {"issuer": "https://i.example"}}
            ).v2(),
            "association": account_associations.create(
                res, org, {"amazon": {"account": "123456789012"}}
            ).v2(),
            "advisories": sorted(a.uid for a in store.advisories.values()),
        }
        headers = {"Authorization": f"Bearer {token}"}
        async with http.get(first.url + "/registry/v2beta1/repos?page_size=2", headers=headers) as r:
            first_page = await r.json()
    store.close()

    store = Store(state)
    async with EmulatorServer(Emulator(store), port=port) as second:
        again = seed(second.emulator)  # idempotent: finds the seeded organization
        assert again.organization.uid == seeded.organization.uid
        assert set(store.groups) == set(groups_before)
        assert store.groups[patched.uid].description == "changed"
        assert len(store.repos) == 6
        assert [t.name for t in second.emulator.registry.catalog.tags.values()] == ["latest"]  # pushed once
        headers = {"Authorization": f"Bearer {token}"}
        async with http.get(second.url + "/registry/v2beta1/repos", headers=headers) as r:
            assert r.status == 200
            assert (await r.json())["totalCount"] == "6"
        res = second.emulator.resources
        assert roles.get(res, role.uid).v2() == kept["role"]
        assert group_invites.render(res, group_invites.get(res, invite.uid)) == kept["invite"]
        assert identity_providers.get(res, kept["provider"]["uid"]).v2() == kept["provider"]
        assert account_associations.get(res, kept["association"]["uid"]).v2() == kept["association"]
        assert sorted(store.advisories) == kept["advisories"] and len(kept["advisories"]) == 2
        assert (
            group_invites.accept(res, invite.uid, {"code": code}, owner.uid).role == role.uid
        )  # the code still opens it
        params = {"page_size": "2", "page_token": first_page["nextPageToken"]}
        async with http.get(second.url + "/registry/v2beta1/repos", params=params, headers=headers) as r:
            assert r.status == 200  # the page-token key survived the restart
            assert len((await r.json())["repos"]) == 2
        oidc = second.emulator.mint(owner.subject)
        params = {"aud": second.url, "identity": owner.uid}
        async with http.get(
            second.url + "/sts/exchange", params=params, headers={"Authorization": f"Bearer {oidc}"}
        ) as r:
            assert r.status == 200
    store.close()


def test_memory_store_keeps_nothing() -> None:
    """Without --state each emulator starts empty with fresh keys."""
    one, two = Emulator(), Emulator()
    one.organization("acme")
    assert not two.store.groups
    assert one.issuer.key.kid != two.issuer.key.kid
