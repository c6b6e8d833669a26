"""The registry's bounds: idle uploads expire, memory without --state is capped, and no request under
/v2/ can make it answer 500 or leave the spec's error shape (a property-based hunt)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenrelay.emulator import Emulator, Store
from tokenrelay.emulator.iam import groups, repos
from tokenrelay.emulator.iam.resources import Resources
from tokenrelay.emulator.registry import Registry, tiny_image
from tokenrelay.emulator.registry.blobs import Blobs, Limits
from tokenrelay.emulator.registry.errors import RegistryError
from tokenrelay.testing import FakeClock


def test_idle_uploads_are_dropped() -> None:
    """An upload left alone for more than an hour is forgotten and its bytes released."""
    clock = FakeClock()
    store = Store()
    resources = Resources(store)
    registry = Registry(store, resources, lambda: "http://127.0.0.1:1", clock=clock)
    org = groups.create(resources, "", {"name": "acme"})
    repo = repos.create(resources, org.uid, "app")
    session = registry.open_session(repo.uid)
    session.upload.write(b"partial")
    clock.tick(3599)
    assert registry.session(session.upload.session, repo.uid) is session  # a request keeps it alive
    clock.tick(3601)
    assert registry.session(session.upload.session, repo.uid) is None
    assert registry.blobs._pending == {}


def test_memory_without_state_is_capped() -> None:
    """Without --state, content past ``max_memory`` is refused, saying to use --state."""
    blobs = Blobs(limits=Limits(max_memory=10))
    blobs.put(b"01234")
    blobs.put(b"01234")  # the same content again takes no more room
    first, second = blobs.start(), blobs.start()
    first.write(b"abc")
    with pytest.raises(RegistryError) as full:
        second.write(b"abc")  # uploads in progress count too
    assert full.value.code == "DENIED"
    assert "start it with --state FILE" in full.value.message
    blobs.discard(first)
    second.write(b"abcde")
    blobs.commit(second, second.digest)
    with pytest.raises(RegistryError):
        blobs.start()


HEX = "0" * 64
SEGMENTS = st.sampled_from(
    [
        "acme",
        "app",
        "blobs",
        "uploads",
        "manifests",
        "tags",
        "list",
        f"sha256:{HEX}",
        "sha256:zz",
        "latest",
        "A",
        "",
        "x" * 300,
        "referrers",
        "_catalog",
    ]
)
QUERY = st.dictionaries(
    st.sampled_from(["digest", "mount", "from", "n", "last", "scope", "service"]),
    st.sampled_from(["", f"sha256:{HEX}", "acme/app", "-1", "5", "x" * 200, "repository:acme/app:pull,push"]),
    max_size=3,
)
REQUEST = st.fixed_dictionaries(
    {
        "method": st.sampled_from(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
        "path": st.lists(SEGMENTS, min_size=0, max_size=6).map(lambda parts: "/v2/" + "/".join(parts)),
        "auth": st.sampled_from(["", "registry", "Bearer garbage", "Basic Z2FyYmFnZQ==", "Basic !!"]),
        "content_type": st.sampled_from(["", "application/vnd.oci.image.manifest.v1+json", "text/plain"]),
        "content_range": st.sampled_from(["", "0-3", "5-1", "x", "0-99999999999"]),
        "query": QUERY,
        "body": st.binary(max_size=64) | st.just(b'{"schemaVersion": 2, "config": {}, "layers": [1]}'),
    }
)


async def _send_all(requests: list[dict[str, Any]]) -> list[tuple[int, bytes, str]]:
    emulator = Emulator()
    async with TestClient(TestServer(emulator.app())) as client:
        emulator.base_url = str(client.make_url("")).rstrip("/")
        org = emulator.organization("acme")
        owner = emulator.workload(org.uid, "owner").identity
        emulator.registry.push(emulator.repo(org.uid, "app"), "latest", tiny_image({"a": b"b"}))
        access = [{"type": "repository", "name": "acme/app", "actions": ["pull", "push", "delete"]}]
        token, _ = emulator.registry.tokens.mint(owner.uid, emulator.registry.service, access, 1e12)
        answers = []
        for r in requests:
            headers = {
                k: v
                for k, v in (("Content-Type", r["content_type"]), ("Content-Range", r["content_range"]))
                if v
            }
            if r["auth"]:
                headers["Authorization"] = f"Bearer {token}" if r["auth"] == "registry" else r["auth"]
            async with client.request(
                r["method"], r["path"], headers=headers, params=r["query"], data=r["body"]
            ) as response:
                answers.append((response.status, await response.read(), r["method"] + " " + r["path"]))
    return answers


@settings(max_examples=40, deadline=None)
@given(st.lists(REQUEST, min_size=1, max_size=12))
def test_no_request_under_v2_gets_a_500(requests: list[dict[str, Any]]) -> None:
    """Whatever the method, path, credentials, ranges and body: never a 500, every refusal in spec form."""
    for status, body, what in asyncio.run(_send_all(requests)):
        assert status < 500, what
        if status >= 400 and not what.startswith("HEAD"):
            errors = json.loads(body)["errors"]
            assert errors and all({"code", "message", "detail"} <= set(e) for e in errors), what
