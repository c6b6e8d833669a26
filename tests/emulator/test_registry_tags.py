"""Pushed images as API resources (``/registry/v2beta1/tags``), and the registry's state across restarts."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

from tokenrelay.emulator import Emulator, EmulatorServer, Store
from tokenrelay.emulator.registry import tiny_image

from ..support.emulator import World, details
from .registry_client import Registry, digest

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


async def test_tags_list_and_get(world: World) -> None:
    """A pushed tag is listed and readable by uid ``<repo uid>/<tag>``, with its manifest's descriptor."""
    reg = Registry(world)
    team = world.group(world.org.uid, "team")
    world.emulator.repo(team.uid, "svc")  # a repo in a child group is still acme/<name>
    token = await reg.token("editor", "repository:acme/app:pull,push", "repository:acme/svc:pull,push")
    manifest = await reg.push_image("acme/app", "v1", token)
    await reg.put_manifest("acme/app", "v2", manifest, token)
    await reg.push_image("acme/svc", "latest", token, layer=b"svc layer")
    repos = {r.name: r.uid for r in world.emulator.store.repos.values()}
    assert repos["svc"].startswith(team.uid + "/")

    status, tag = await world.call("GET", f"/registry/v2beta1/tags/{repos['app']}/v1", as_="viewer")
    assert status == 200
    assert tag == {
        "uid": f"{repos['app']}/v1",
        "name": "v1",
        "digest": digest(manifest),
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "size": str(len(manifest)),
        "createTime": tag["createTime"],
        "updateTime": tag["createTime"],
    }
    assert TIMESTAMP.fullmatch(tag["createTime"])

    _, listed = await world.call(
        "GET", "/registry/v2beta1/tags", params={"uidp.descendants_of": world.org.uid}
    )
    assert listed["totalCount"] == "3"
    assert sorted(t["name"] for t in listed["tags"]) == ["latest", "v1", "v2"]
    assert [t["uid"] for t in listed["tags"]] == sorted(t["uid"] for t in listed["tags"])  # default: by uid
    _, children = await world.call("GET", "/registry/v2beta1/tags", params={"uidp.children_of": repos["app"]})
    assert [t["name"] for t in children["tags"]] == ["v1", "v2"]
    _, by_name = await world.call("GET", "/registry/v2beta1/tags", params={"order_by": "name desc"})
    assert [t["name"] for t in by_name["tags"]] == ["v2", "v1", "latest"]


async def test_tags_pagination_follows_the_cursor(world: World) -> None:
    """``page_size=1`` walks every tag once, through ``nextPageToken``, with the total on each page."""
    reg = Registry(world)
    token = await reg.token("editor", "repository:acme/app:pull,push")
    manifest = await reg.push_image("acme/app", "t0", token)
    for n in range(1, 4):
        await reg.put_manifest("acme/app", f"t{n}", manifest, token)
    seen, page_token = [], ""
    while True:
        params = {"page_size": "1", **({"page_token": page_token} if page_token else {})}
        status, page = await world.call("GET", "/registry/v2beta1/tags", params=params)
        assert (status, page["totalCount"], len(page["tags"])) == (200, "4", 1)
        seen.append(page["tags"][0]["name"])
        page_token = page.get("nextPageToken", "")
        if not page_token:
            break
    assert sorted(seen) == ["t0", "t1", "t2", "t3"]


async def test_tags_are_only_shown_to_who_may_read_them(world: World) -> None:
    """An identity bound elsewhere lists no tag and is refused a Get (7); an unknown uid is 5."""
    reg = Registry(world)
    await reg.push_image("acme/app", "v1", await reg.token("editor", "repository:acme/app:pull,push"))
    uid = next(iter(world.emulator.registry.catalog.tags))
    _, listed = await world.call("GET", "/registry/v2beta1/tags", as_="outsider")
    assert (listed["totalCount"], listed["tags"]) == ("0", [])
    status, body = await world.call("GET", f"/registry/v2beta1/tags/{uid}", as_="outsider")
    assert (status, body["code"]) == (403, 7)
    status, body = await world.call("GET", f"/registry/v2beta1/tags/{uid}x", as_="owner")
    assert (status, body["code"], details(body, "ErrorInfo")["domain"]) == (
        404,
        5,
        "registry.emulator.tokenrelay",
    )


async def test_retagging_moves_update_time_only(world: World) -> None:
    """Pointing a tag at another manifest changes its digest and ``updateTime``; ``createTime`` stays."""
    reg = Registry(world)
    token = await reg.token("editor", "repository:acme/app:pull,push")
    await reg.push_image("acme/app", "v1", token)
    uid = next(iter(world.emulator.registry.catalog.tags))
    _, before = await world.call("GET", f"/registry/v2beta1/tags/{uid}")
    world.wall.advance(5)
    second = await reg.push_image("acme/app", "v1", token, layer=b"another layer")
    _, after = await world.call("GET", f"/registry/v2beta1/tags/{uid}")
    assert after["createTime"] == before["createTime"]
    assert after["updateTime"] != before["updateTime"]
    assert after["digest"] == digest(second) != before["digest"]


async def test_state_keeps_images_across_a_restart(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """With --state the content sits in ``FILE.blobs/`` and the tags in FILE: a restart serves both."""
    state = str(tmp_path / "state.db")
    image = tiny_image({"hello.txt": b"kept\n"})
    store = Store(state)
    async with EmulatorServer(Emulator(store)) as first:
        org = first.emulator.organization("acme")
        owner = first.emulator.workload(org.uid, "sub", role="owner").identity
        repo = first.emulator.repo(org.uid, "app")
        first.emulator.registry.push(repo, "v1", image)
        port = int(first.url.rsplit(":", 1)[1])
        api_token = first.emulator.api_token(owner.uid)
    store.close()
    hexdigest = image.digest.removeprefix("sha256:")
    assert (tmp_path / "state.db.blobs" / "sha256" / hexdigest[:2] / hexdigest).read_bytes() == image.manifest

    store = Store(state)
    async with EmulatorServer(Emulator(store), port=port) as second:
        world = World(second.emulator, second.url, None, http, org, {"owner": api_token}, {})  # type: ignore[arg-type]
        reg = Registry(world)
        token = await reg.token("owner", "repository:acme/app:pull")
        got = await reg.call("GET", "/v2/acme/app/manifests/v1", token)
        assert (got.status, got.body) == (200, image.manifest)
        layer = await reg.call("GET", f"/v2/acme/app/blobs/{digest(image.blobs[1])}", token)
        assert layer.body == image.blobs[1]
        head = await reg.call("HEAD", f"/v2/acme/app/blobs/{digest(image.blobs[1])}", token)
        assert (head.status, head.headers["Content-Length"], head.body) == (
            200,
            str(len(image.blobs[1])),
            b"",
        )
        status, tag = await world.call("GET", f"/registry/v2beta1/tags/{repo.uid}/v1")
        assert (status, tag["digest"]) == (200, image.digest)
    store.close()
