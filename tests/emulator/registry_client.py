"""A minimal distribution-API client for the registry tests: token, blob and manifest calls, raw
enough that each test sees the exact statuses, headers and bodies a real client would."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from multidict import CIMultiDictProxy

from tokenrelay.emulator.registry.image import CONFIG_TYPE, LAYER_TYPE
from tokenrelay.emulator.registry.manifests import OCI_MANIFEST

from ..support.emulator import World


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Answer:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def error(self) -> dict[str, Any]:
        """The one error of a distribution-spec error body."""
        errors: list[dict[str, Any]] = self.json()["errors"]
        assert len(errors) == 1, errors
        return errors[0]


@dataclass
class Registry:
    world: World
    tokens: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)

    @property
    def host(self) -> str:
        return self.world.url.removeprefix("http://")

    async def call(
        self,
        method: str,
        path: str,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> Answer:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        async with self.world.http.request(method, self.world.url + path, headers=sent, **kw) as response:
            return Answer(response.status, response.headers, await response.read())

    async def token_answer(self, api_token: str | None, *scopes: str, username: str = "_token") -> Answer:
        headers = {}
        if api_token is not None:
            basic = base64.b64encode(f"{username}:{api_token}".encode()).decode()
            headers["Authorization"] = f"Basic {basic}"
        params = [("service", self.host), *(("scope", s) for s in scopes)]
        return await self.call("GET", "/v2/token", headers=headers, params=params)

    async def token(self, role: str, *scopes: str) -> str:
        """A registry token for the identity with ``role`` in the world (cached per scopes)."""
        key = (role, " ".join(scopes))
        if key not in self.tokens:
            answer = await self.token_answer(self.world.tokens[role], *scopes)
            assert answer.status == 200, answer.body
            self.tokens[key] = answer.json()["token"]
        return self.tokens[key]

    async def push_blob(self, name: str, data: bytes, token: str) -> Answer:
        return await self.call(
            "POST", f"/v2/{name}/blobs/uploads/", token, params={"digest": digest(data)}, data=data
        )

    async def push_image(self, name: str, tag: str, token: str, layer: bytes = b"layer") -> bytes:
        """Config, one layer and an OCI manifest tagged ``tag``; the manifest's bytes."""
        config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"diff_ids": []}}).encode()
        for blob in (config, layer):
            assert (await self.push_blob(name, blob, token)).status == 201
        manifest = image_manifest(config, layer)
        answer = await self.put_manifest(name, tag, manifest, token)
        assert answer.status == 201, answer.body
        return manifest

    async def put_manifest(
        self, name: str, reference: str, body: bytes, token: str, media_type: str = OCI_MANIFEST
    ) -> Answer:
        return await self.call(
            "PUT", f"/v2/{name}/manifests/{reference}", token, headers={"Content-Type": media_type}, data=body
        )


def image_manifest(
    config: bytes, *layers: bytes, media_type: str = OCI_MANIFEST, config_type: str = CONFIG_TYPE
) -> bytes:
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": {"mediaType": config_type, "digest": digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": digest(x), "size": len(x)} for x in layers],
        }
    ).encode()
