"""--state FILE: a restart keeps resources and keys, so earlier tokens stay valid."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tokenrelay.emulator import Emulator, EmulatorServer, Store
from tokenrelay.emulator.seed import seed


async def test_restart_keeps_resources_and_tokens(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """Resources survive a restart, and an API token issued before it is accepted after it."""
    state = str(tmp_path / "state.db")
    store = Store(state)
    async with EmulatorServer(Emulator(store), port=0) as first:
        seeded = seed(first.emulator)
        owner = seeded.identities["owner"]
        port = int(first.url.rsplit(":", 1)[1])
        token = first.emulator.api_token(owner.uid)
        groups_before = {uid: g.v2() for uid, g in store.groups.items()}
        patched = next(g for g in store.groups.values() if g.name == "apps")
        first.emulator.resources.patch_group(patched.uid, {"description": "changed"}, None)
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
