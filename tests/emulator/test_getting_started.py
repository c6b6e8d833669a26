"""docs/getting-started.md's trust set-up, run as written against the emulator: its identity-provider,
identity and role-binding bodies make a token service trust another issuer's Kubernetes subject."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aiohttp

from tokenrelay.emulator import Emulator, EmulatorServer
from tokenrelay.testing import FakeClock

DOC = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text()
DOC_ISSUER = "https://oidc.prod.example.com"
UID = re.compile(r"[0-9a-f]{40}(?:/[0-9a-f]{16})+")  # the shape the docs give (test_doc_claims)


def _body(key: str) -> dict[str, Any]:
    """The page's one JSON block holding ``key``."""
    blocks = map(json.loads, re.findall(r"```json\n(.*?)```", DOC, flags=re.DOTALL))
    (found,) = [block for block in blocks if key in block]
    return dict(found)


async def test_the_pages_bodies_let_a_cluster_subject_exchange(
    server: EmulatorServer, clock: FakeClock, http: aiohttp.ClientSession
) -> None:
    """An identity provider for the cluster's issuer, an identity with the page's claimMatch and a role
    binding, created with the page's bodies, let a token of that issuer and subject be exchanged; the
    uid the identity gets has the shape the docs give."""
    token_service = server.emulator
    org = token_service.organization("acme")
    admin = token_service.api_token(token_service.workload(org.uid, subject="admin").identity.uid)
    headers = {"Authorization": f"Bearer {admin}"}
    async with EmulatorServer(Emulator(wall=clock.wall), grpc=False) as cluster:

        async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            text = json.dumps(body).replace(DOC_ISSUER, cluster.url)
            async with http.post(
                f"{server.url}/iam/v2beta1/{path}/{org.uid}",
                data=text,
                headers={**headers, "Content-Type": "application/json"},
            ) as answer:
                assert answer.status == 200, await answer.text()
                created: dict[str, Any] = await answer.json()
                return created

        subject = _body("claimMatch")["claimMatch"]["subject"]
        assert re.fullmatch(r"system:serviceaccount:[a-z0-9-]+:[a-z0-9-]+", subject)
        oidc_token = cluster.emulator.mint(subject, audience=server.url)

        async def exchange(uid: str) -> int:
            async with http.get(
                f"{server.url}/sts/exchange",
                params={"aud": server.url, "identity": uid},
                headers={"Authorization": f"Bearer {oidc_token}"},
            ) as answer:
                return answer.status

        identity = await post("identities", _body("claimMatch"))
        assert UID.fullmatch(identity["uid"])
        assert await exchange(identity["uid"]) == 401  # the cluster's issuer is not trusted yet
        await post("identityProviders", _body("oidc"))
        binding = re.search(r"-d '(\{\"identityUid\".*?\})'", DOC)
        assert binding is not None
        async with http.get(f"{server.url}/iam/v2beta1/roles", headers=headers) as answer:
            roles = {role["name"]: role["uid"] for role in (await answer.json())["roles"]}
        await post(
            "roleBindings",
            json.loads(
                binding.group(1)
                .replace("<identity uid>", identity["uid"])
                .replace("<role uid>", roles["viewer"])
            ),
        )
        assert await exchange(identity["uid"]) == 200
