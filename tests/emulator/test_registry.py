"""The emulator's OCI registry over HTTP: the token flow, uploads, manifests, and each refusal's body."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator

import jwt
import pytest
from yarl import URL

from tokenrelay.emulator.registry.blobs import Limits
from tokenrelay.emulator.registry.manifests import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX

from ..support.emulator import World
from .registry_client import Answer, Registry, digest, image_manifest

APP = "acme/app"
PUSH = f"repository:{APP}:pull,push"
PULL = f"repository:{APP}:pull"


@pytest.fixture
def reg(world: World) -> Registry:
    return Registry(world)


def challenge(reg: Registry, scope: str | None = None, insufficient: bool = False) -> str:
    text = f'Bearer realm="{reg.world.url}/v2/token",service="{reg.host}"'
    if scope:
        text += f',scope="{scope}"'
    return text + (',error="insufficient_scope"' if insufficient else "")


# -- the token flow -------------------------------------------------------------------------------


async def test_version_check_challenges_without_a_token(reg: Registry) -> None:
    """``GET /v2/`` without a token: 401, the Bearer challenge naming the realm and service, spec body."""
    answer = await reg.call("GET", "/v2/")
    assert answer.status == 401
    assert answer.headers["WWW-Authenticate"] == challenge(reg)
    assert answer.headers["Docker-Distribution-API-Version"] == "registry/2.0"
    assert answer.json() == {
        "errors": [
            {
                "code": "UNAUTHORIZED",
                "message": f"authentication required: get a registry token at {reg.world.url}/v2/token",
                "detail": None,
            }
        ]
    }
    ok = await reg.call("GET", "/v2/", await reg.token("viewer"))
    assert (ok.status, ok.json()) == (200, {})
    api_token = await reg.call("GET", "/v2/", reg.world.tokens["owner"])
    assert api_token.status == 401  # an API token is not a registry token


async def test_token_endpoint_refuses_anonymous_and_bad_credentials(reg: Registry, world: World) -> None:
    """Anonymous, a non-API-token password, another username, an expired token: 401; foreign service: 400."""
    realm = f'Basic realm="{world.url}/v2/token"'
    cases = [
        (None, "_token", "send HTTP Basic credentials: username _token, password an API token"),
        ("not-a-token", "_token", "the API token is not one this token service issued"),
        (world.tokens["owner"], "owner", "the username must be _token"),
    ]
    for api_token, username, why in cases:
        answer = await reg.token_answer(api_token, PULL, username=username)
        assert answer.status == 401
        assert answer.headers["WWW-Authenticate"] == realm
        assert answer.error()["code"] == "UNAUTHORIZED"
        assert answer.error()["message"].startswith(f"authentication required: {why}")
        assert world.tokens["owner"] not in answer.body.decode()
    basic = base64.b64encode(f"_token:{world.tokens['owner']}".encode()).decode()
    other = await reg.call(
        "GET",
        "/v2/token",
        headers={"Authorization": f"Basic {basic}"},
        params={"service": "registry.example"},
    )
    assert (other.status, other.error()["message"]) == (
        400,
        "the operation is unsupported: service 'registry.example' is not this registry; "
        f"ask for '{reg.host}'",
    )
    world.wall.advance(3601)
    expired = await reg.token_answer(world.tokens["owner"], PULL)
    assert (expired.status, expired.error()["message"]) == (
        401,
        "authentication required: the API token has expired",
    )


async def test_token_grants_what_the_role_allows(reg: Registry, world: World) -> None:
    """Each identity gets the requested actions its role allows on the repo's group, and no more."""
    granted = {}
    for role in ("viewer", "editor", "owner", "outsider"):
        answer = await reg.token_answer(world.tokens[role], PUSH, "repository:elsewhere/x:pull")
        assert answer.status == 200
        body = answer.json()
        claims = jwt.decode(body["token"], options={"verify_signature": False})
        assert (claims["aud"], claims["sub"], claims["iss"]) == (
            reg.host,
            world.uids[role],
            world.url + "/v2/token",
        )
        assert claims["exp"] - claims["iat"] == body["expires_in"] == 300
        granted[role] = claims["access"]
    assert granted["viewer"] == [{"type": "repository", "name": APP, "actions": ["pull"]}]
    assert (
        granted["editor"]
        == granted["owner"]
        == [{"type": "repository", "name": APP, "actions": ["pull", "push"]}]
    )
    assert granted["outsider"] == [{"type": "repository", "name": "elsewhere/x", "actions": ["pull"]}]


async def test_token_endpoint_takes_the_oauth2_password_grant(reg: Registry, world: World) -> None:
    """containerd's way: ``POST /v2/token`` with a form; other grant types are refused."""
    form = {
        "grant_type": "password",
        "username": "_token",
        "password": world.tokens["viewer"],
        "service": reg.host,
        "scope": PUSH,
        "client_id": "containerd-client",
    }
    answer = await reg.call("POST", "/v2/token", data=form)
    assert answer.status == 200
    claims = jwt.decode(answer.json()["access_token"], options={"verify_signature": False})
    assert claims["access"] == [{"type": "repository", "name": APP, "actions": ["pull"]}]
    refresh = await reg.call("POST", "/v2/token", data=form | {"grant_type": "refresh_token"})
    assert (refresh.status, refresh.error()["code"]) == (400, "UNSUPPORTED")


async def test_api_tokens_for_the_api_or_the_registry_host_are_taken(reg: Registry, world: World) -> None:
    """The realm takes an API token whose audience is the API's URL or the registry host, no other."""
    minted = world.emulator.tokens.mint
    for audience in (world.url, reg.host):
        answer = await reg.token_answer(minted(world.uids["viewer"], audience), PULL)
        assert answer.status == 200, audience
    foreign = await reg.token_answer(minted(world.uids["viewer"], "https://registry.example"), PULL)
    assert (foreign.status, foreign.error()["message"]) == (
        401,
        "authentication required: the API token is for audience https://registry.example, not this API",
    )


async def test_registry_token_never_outlives_the_api_token(reg: Registry, world: World) -> None:
    """An API token with 60 s left buys a registry token for 60 s, not 300."""
    short = world.emulator.api_token(world.uids["owner"], lifetime=60)
    answer = await reg.token_answer(short, PULL)
    assert answer.json()["expires_in"] == 60


async def test_no_right_is_denied_a_missing_scope_is_challenged(reg: Registry) -> None:
    """A viewer's push: 403 DENIED naming the role; an editor's pull-only token: 401 insufficient_scope."""
    viewer = await reg.push_blob(APP, b"x", await reg.token("viewer", PUSH))
    assert viewer.status == 403
    assert viewer.json() == {
        "errors": [
            {
                "code": "DENIED",
                "message": "requested access to the resource is denied: push on acme/app needs the editor "
                "role or better on its group (or the organization 'acme', for a new repo)",
                "detail": [{"Type": "repository", "Name": APP, "Action": "push"}],
            }
        ]
    }
    editor = await reg.push_blob(APP, b"x", await reg.token("editor", PULL))
    assert editor.status == 401
    assert editor.headers["WWW-Authenticate"] == challenge(reg, PUSH, insufficient=True)
    outsider = await reg.call("GET", f"/v2/{APP}/tags/list", await reg.token("outsider", PULL))
    assert (outsider.status, outsider.error()["code"]) == (403, "DENIED")


# -- blobs and uploads ------------------------------------------------------------------------------


async def test_monolithic_upload_creates_the_repo_and_serves_the_blob(reg: Registry, world: World) -> None:
    """First push of ``acme/app`` makes repo ``app`` in the organization's root group; its blob reads back."""
    token = await reg.token("editor", PUSH)
    answer = await reg.push_blob(APP, b"hello blob", token)
    assert answer.status == 201
    assert answer.headers["Location"] == f"/v2/{APP}/blobs/{digest(b'hello blob')}"
    assert answer.headers["Docker-Content-Digest"] == digest(b"hello blob")
    head = await reg.call("HEAD", f"/v2/{APP}/blobs/{digest(b'hello blob')}", token)
    assert (head.status, head.headers["Content-Length"], head.body) == (200, "10", b"")
    get = await reg.call("GET", f"/v2/{APP}/blobs/{digest(b'hello blob')}", token)
    assert (get.status, get.body, get.headers["Docker-Content-Digest"]) == (
        200,
        b"hello blob",
        digest(b"hello blob"),
    )
    _, repos = await world.call("GET", "/registry/v2beta1/repos", params={"uidp.children_of": world.org.uid})
    assert [r["name"] for r in repos["repos"]] == ["app"]


async def test_digest_mismatch_is_refused_and_nothing_kept(reg: Registry) -> None:
    """Content that hashes otherwise than the digest named: 400 DIGEST_INVALID; neither digest is served."""
    token = await reg.token("editor", PUSH)
    claimed = digest(b"what was promised")
    answer = await reg.call(
        "POST", f"/v2/{APP}/blobs/uploads/", token, params={"digest": claimed}, data=b"other"
    )
    assert answer.status == 400
    assert answer.error() == {
        "code": "DIGEST_INVALID",
        "message": "provided digest did not match uploaded content: "
        f"the content hashes to {digest(b'other')}, not {claimed}",
        "detail": None,
    }
    for each in (claimed, digest(b"other")):
        missing = await reg.call("HEAD", f"/v2/{APP}/blobs/{each}", token)
        assert missing.status == 404


async def test_chunked_upload_checks_each_chunk_position(reg: Registry) -> None:
    """POST, PATCH in order (with ``Content-Range``), an out-of-order chunk refused 416, then PUT."""
    token = await reg.token("editor", PUSH)
    start = await reg.call("POST", f"/v2/{APP}/blobs/uploads/", token)
    assert (start.status, start.headers["Range"]) == (202, "0-0")
    location = start.headers["Location"]
    assert location.startswith(f"/v2/{APP}/blobs/uploads/")
    first = await reg.call("PATCH", location, token, headers={"Content-Range": "0-4"}, data=b"01234")
    assert (first.status, first.headers["Range"]) == (202, "0-4")
    wrong = await reg.call("PATCH", location, token, headers={"Content-Range": "3-6"}, data=b"3456")
    assert (wrong.status, wrong.headers["Range"], wrong.error()["code"]) == (
        416,
        "0-4",
        "BLOB_UPLOAD_INVALID",
    )
    second = await reg.call("PATCH", location, token, headers={"Content-Range": "5-9"}, data=b"56789")
    assert second.headers["Range"] == "0-9"
    status = await reg.call("GET", location, token)
    assert (status.status, status.headers["Range"]) == (204, "0-9")
    done = await reg.call("PUT", location, token, params={"digest": digest(b"0123456789")})
    assert done.status == 201
    blob = await reg.call("GET", f"/v2/{APP}/blobs/{digest(b'0123456789')}", token)
    assert blob.body == b"0123456789"
    gone = await reg.call("GET", location, token)
    assert (gone.status, gone.error()["code"]) == (404, "BLOB_UPLOAD_UNKNOWN")


async def test_an_upload_being_written_is_not_cancelled_or_written_twice(reg: Registry) -> None:
    """While a PATCH streams into an upload, a DELETE or a second PATCH is refused; the first completes."""
    token = await reg.token("editor", PUSH)
    location = (await reg.call("POST", f"/v2/{APP}/blobs/uploads/", token)).headers["Location"]
    session = reg.world.emulator.registry.sessions[location.rsplit("/", 1)[1]]
    release = asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:
        yield b"first half "
        await release.wait()
        yield b"second half"

    writing = asyncio.create_task(reg.call("PATCH", location, token, data=slow_body()))
    async with asyncio.timeout(10):
        while not session.busy:
            await asyncio.sleep(0.01)
    for method in ("DELETE", "PATCH"):
        refused = await reg.call(method, location, token, data=b"x" if method == "PATCH" else None)
        assert (refused.status, refused.error()["code"]) == (400, "BLOB_UPLOAD_INVALID"), method
    release.set()
    assert (await writing).headers["Range"] == "0-21"
    done = await reg.call("PUT", location, token, params={"digest": digest(b"first half second half")})
    assert done.status == 201


async def test_cross_repo_mount_or_fallback_to_upload(reg: Registry) -> None:
    """A mount from a repo the token may pull links the blob (201); otherwise the spec's 202 fallback."""
    base = "acme/base"
    await reg.push_blob(base, b"shared layer", await reg.token("editor", f"repository:{base}:pull,push"))
    params = {"mount": digest(b"shared layer"), "from": base}
    without = await reg.call(
        "POST", f"/v2/{APP}/blobs/uploads/", await reg.token("editor", PUSH), params=params
    )
    assert (without.status, without.headers["Location"].startswith(f"/v2/{APP}/blobs/uploads/")) == (
        202,
        True,
    )
    token = await reg.token("editor", PUSH, f"repository:{base}:pull")
    mounted = await reg.call("POST", f"/v2/{APP}/blobs/uploads/", token, params=params)
    assert (mounted.status, mounted.headers["Location"]) == (
        201,
        f"/v2/{APP}/blobs/{digest(b'shared layer')}",
    )
    assert (
        await reg.call("GET", f"/v2/{APP}/blobs/{digest(b'shared layer')}", token)
    ).body == b"shared layer"


async def test_blob_of_another_repo_is_not_served(reg: Registry) -> None:
    """Content is shared on disk, but a repo serves only the blobs pushed or mounted into it."""
    await reg.push_blob("acme/base", b"private", await reg.token("editor", "repository:acme/base:pull,push"))
    token = await reg.token("editor", PUSH)
    await reg.push_blob(APP, b"mine", token)
    answer = await reg.call("GET", f"/v2/{APP}/blobs/{digest(b'private')}", token)
    assert (answer.status, answer.error()["code"]) == (404, "BLOB_UNKNOWN")


async def test_sizes_and_open_uploads_are_bounded(reg: Registry, world: World) -> None:
    """A blob past the limit is 413 SIZE_INVALID; past the open-upload limit a POST is 429."""
    world.emulator.registry.blobs.limits = Limits(max_blob=8, max_manifest=64, max_uploads=2)
    token = await reg.token("editor", PUSH)
    big = await reg.push_blob(APP, b"123456789", token)
    assert (big.status, big.error()["code"]) == (413, "SIZE_INVALID")
    manifest = await reg.put_manifest(APP, "v1", b"{" + b" " * 64 + b"}", token)
    assert (manifest.status, manifest.error()["code"]) == (413, "SIZE_INVALID")
    for _ in range(2):
        assert (await reg.call("POST", f"/v2/{APP}/blobs/uploads/", token)).status == 202
    third = await reg.call("POST", f"/v2/{APP}/blobs/uploads/", token)
    assert (third.status, third.error()["code"]) == (429, "TOOMANYREQUESTS")


# -- manifests and tags -----------------------------------------------------------------------------


async def test_manifest_by_tag_and_digest(reg: Registry) -> None:
    """PUT by tag, then GET/HEAD by tag and by digest give the same bytes, media type and digest."""
    token = await reg.token("editor", PUSH)
    manifest = await reg.push_image(APP, "v1", token)
    for reference in ("v1", digest(manifest)):
        got = await reg.call("GET", f"/v2/{APP}/manifests/{reference}", token)
        assert (got.status, got.body) == (200, manifest)
        assert got.headers["Content-Type"] == "application/vnd.oci.image.manifest.v1+json"
        assert got.headers["Docker-Content-Digest"] == digest(manifest)
        head = await reg.call("HEAD", f"/v2/{APP}/manifests/{reference}", token)
        assert (head.status, head.headers["Content-Length"]) == (200, str(len(manifest)))
    tags = await reg.call("GET", f"/v2/{APP}/tags/list", token)
    assert tags.json() == {"name": APP, "tags": ["v1"]}


async def test_docker_schema2_and_indexes(reg: Registry) -> None:
    """Docker schema 2 manifests, Docker manifest lists and OCI indexes are stored with their media type."""
    token = await reg.token("editor", PUSH)
    config, layer = b'{"os":"linux"}', b"docker layer"
    for blob in (config, layer):
        await reg.push_blob(APP, blob, token)
    docker = image_manifest(
        config,
        layer,
        media_type=DOCKER_MANIFEST,
        config_type="application/vnd.docker.container.image.v1+json",
    )
    assert (await reg.put_manifest(APP, digest(docker), docker, token, DOCKER_MANIFEST)).status == 201
    child = {"mediaType": DOCKER_MANIFEST, "digest": digest(docker), "size": len(docker)}
    for media_type, tag in ((DOCKER_LIST, "list"), (OCI_INDEX, "index")):
        index = json.dumps({"schemaVersion": 2, "mediaType": media_type, "manifests": [child]}).encode()
        assert (await reg.put_manifest(APP, tag, index, token, media_type)).status == 201
        got = await reg.call("GET", f"/v2/{APP}/manifests/{tag}", token)
        assert (got.headers["Content-Type"], got.body) == (media_type, index)


async def test_manifest_refusals(reg: Registry) -> None:
    """Unknown blobs, a wrong Content-Type, a wrong size, a digest mismatch, a bad tag, schema 1."""
    token = await reg.token("editor", PUSH)
    config = b"{}"
    await reg.push_blob(APP, config, token)
    unknown = await reg.put_manifest(APP, "v1", image_manifest(config, b"never pushed"), token)
    assert (unknown.status, unknown.error()) == (
        400,
        {
            "code": "MANIFEST_BLOB_UNKNOWN",
            "message": "manifest references a manifest or blob unknown to registry: layers[0] names blob "
            f"{digest(b'never pushed')}, which this repository does not hold; push it first",
            "detail": {"digest": digest(b"never pushed")},
        },
    )
    good = image_manifest(config)
    wrong_type = await reg.put_manifest(APP, "v1", good, token, media_type="application/json")
    assert wrong_type.error()["code"] == "MANIFEST_INVALID"
    assert "Content-Type 'application/json' is not a manifest type" in wrong_type.error()["message"]
    wrong_size = good.replace(b'"size": 2', b'"size": 3')
    assert (
        "config.size is 3, but" in (await reg.put_manifest(APP, "v1", wrong_size, token)).error()["message"]
    )
    mismatch = await reg.put_manifest(APP, digest(b"other"), good, token)
    assert (mismatch.status, mismatch.error()["code"]) == (400, "DIGEST_INVALID")
    bad_tag = await reg.put_manifest(APP, "-dash", good, token)
    assert (bad_tag.status, bad_tag.error()["code"]) == (400, "TAG_INVALID")
    schema1 = await reg.put_manifest(APP, "v1", b'{"schemaVersion": 1}', token)
    assert "schemaVersion must be 2" in schema1.error()["message"]
    assert (await reg.call("GET", f"/v2/{APP}/manifests/v1", token)).status == 404
    fresh = "acme/never-pushed"
    refused = await reg.put_manifest(
        fresh, "v1", good, await reg.token("editor", f"repository:{fresh}:pull,push")
    )
    assert refused.error()["code"] == "MANIFEST_BLOB_UNKNOWN"
    assert "never-pushed" not in {
        r.name for r in reg.world.emulator.store.repos.values()
    }  # no empty repo left


async def test_delete_a_tag_or_a_manifest(reg: Registry) -> None:
    """DELETE by tag drops the tag; by digest drops the manifest and every tag on it; viewers may not."""
    token = await reg.token("editor", f"repository:{APP}:pull,push,delete")
    manifest = await reg.push_image(APP, "v1", token)
    await reg.put_manifest(APP, "v2", manifest, token)
    await reg.put_manifest(APP, "v3", manifest, token)
    viewer = await reg.call(
        "DELETE", f"/v2/{APP}/manifests/v1", await reg.token("viewer", f"repository:{APP}:delete")
    )
    assert (viewer.status, viewer.error()["code"]) == (403, "DENIED")
    assert (await reg.call("DELETE", f"/v2/{APP}/manifests/v1", token)).status == 202
    assert (await reg.call("GET", f"/v2/{APP}/tags/list", token)).json()["tags"] == ["v2", "v3"]
    assert (await reg.call("GET", f"/v2/{APP}/manifests/{digest(manifest)}", token)).status == 200
    assert (await reg.call("DELETE", f"/v2/{APP}/manifests/{digest(manifest)}", token)).status == 202
    assert (await reg.call("GET", f"/v2/{APP}/tags/list", token)).json()["tags"] == []
    gone = await reg.call("GET", f"/v2/{APP}/manifests/v2", token)
    assert (gone.status, gone.error()["code"]) == (404, "MANIFEST_UNKNOWN")


async def test_tags_list_pages_with_a_link(reg: Registry) -> None:
    """``n`` and ``last`` page the tag list in lexical order, with a ``Link`` to the next page."""
    token = await reg.token("editor", PUSH)
    manifest = await reg.push_image(APP, "b", token)
    for tag in ("a", "c"):
        await reg.put_manifest(APP, tag, manifest, token)
    first = await reg.call("GET", f"/v2/{APP}/tags/list", token, params={"n": "2"})
    assert first.json()["tags"] == ["a", "b"]
    assert first.headers["Link"] == f'</v2/{APP}/tags/list?n=2&last=b>; rel="next"'
    rest = await reg.call("GET", f"/v2/{APP}/tags/list", token, params={"n": "2", "last": "b"})
    assert (rest.json()["tags"], "Link" in rest.headers) == (["c"], False)
    bad = await reg.call("GET", f"/v2/{APP}/tags/list", token, params={"n": "-1"})
    assert (bad.status, bad.error()["code"]) == (400, "PAGINATION_NUMBER_INVALID")


async def test_unknown_names_paths_and_methods(reg: Registry) -> None:
    """Every answer under /v2/ is the spec's error JSON: bad names, unknown repos, paths and methods."""
    token = await reg.token("owner", PULL, "repository:acme/missing:pull")
    cases = [
        ("GET", "/v2/Acme/App/tags/list", 400, "NAME_INVALID"),
        ("GET", "/v2/acme/tags/list", 400, "NAME_INVALID"),
        ("GET", "/v2/acme/missing/tags/list", 404, "NAME_UNKNOWN"),
        ("GET", f"/v2/{APP}/blobs/sha512:{'0' * 128}", 400, "DIGEST_INVALID"),
        ("GET", f"/v2/{APP}/referrers/{digest(b'')}", 404, "UNSUPPORTED"),
        ("PATCH", f"/v2/{APP}/manifests/v1", 405, "UNSUPPORTED"),
        ("POST", "/v2/", 405, "UNSUPPORTED"),
    ]
    for method, path, status, code in cases:
        answer = await reg.call(method, path, token)
        assert (answer.status, answer.error()["code"]) == (status, code), path


@pytest.mark.parametrize(
    "name", ["acme/../app", "acme/./app", "acme/app/..", "acme/app/.", "./acme/app", "../acme"]
)
async def test_names_with_dot_components_are_refused(reg: Registry, name: str) -> None:
    """An image name with a `.` or `..` component, sent as is (not normalised by the client): a pull and
    a push are NAME_INVALID, the token realm grants nothing on it, and no repo is made."""
    token = await reg.token("owner", f"repository:{name}:pull,push", PUSH)
    for method, rest in (("GET", "tags/list"), ("POST", "blobs/uploads/"), ("PUT", "manifests/v1")):
        url = URL(f"{reg.world.url}/v2/{name}/{rest}", encoded=True)
        async with reg.world.http.request(method, url, headers={"Authorization": f"Bearer {token}"}) as r:
            answer = Answer(r.status, r.headers, await r.read())
        assert (answer.status, answer.error()["code"]) == (400, "NAME_INVALID"), (method, rest)
    granted = await reg.token_answer(reg.world.tokens["owner"], f"repository:{name}:pull,push")
    access = jwt.decode(granted.json()["token"], options={"verify_signature": False})["access"]
    assert (granted.status, access) == (200, [])
    assert reg.world.emulator.store.repos == {}
