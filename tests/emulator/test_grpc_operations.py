"""Every resource the JSON API serves is served over gRPC too: the operations added after groups."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format

from tokenrelay.emulator.grpcapi import iam_pb2, methods, registry_pb2, vulnerabilities_pb2
from tokenrelay.emulator.iam.access import ROLE_BY_NAME
from tokenrelay.emulator.registry import tiny_image

from ..support.emulator import World
from .grpc_client import Client

IAM = "/iam.v2beta1."


def as_json(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


def test_every_json_collection_has_a_grpc_service() -> None:
    """Each List route of the JSON API has its gRPC service (the three domains, every kind)."""
    served = set(methods.Methods(lambda: "").by_path)
    for service, method in [
        ("iam.v2beta1.Groups", "ListGroups"),
        ("iam.v2beta1.Identities", "ListIdentities"),
        ("iam.v2beta1.Roles", "ListRoles"),
        ("iam.v2beta1.RoleBindings", "ListRoleBindings"),
        ("iam.v2beta1.IdentityProviders", "ListIdentityProviders"),
        ("iam.v2beta1.AccountAssociations", "ListAccountAssociations"),
        ("iam.v2beta1.GroupInvites", "ListGroupInvites"),
        ("registry.v2beta1.Repos", "ListRepos"),
        ("registry.v2beta1.Tags", "ListTags"),
        ("vulnerabilities.v2beta1.Advisories", "ListAdvisories"),
    ]:
        assert f"/{service}/{method}" in served
    assert len(served) == 41 + 1  # the document's 41 operations and AcceptGroupInvite


async def test_custom_roles_and_binding_updates(world: World, client: Client) -> None:
    """A custom role made over gRPC can be bound, the binding moved to it, and both removed."""
    owner = world.tokens["owner"]
    role = await client.call(
        IAM + "Roles/CreateRole",
        iam_pb2.CreateRoleRequest(
            parent=world.org.uid, role=iam_pb2.Role(name="lister", capabilities=["groups.list", "groups.get"])
        ),
        iam_pb2.Role,
        owner,
    )
    assert role.uid.startswith(world.org.uid + "/") and list(role.capabilities) == [
        "groups.get",
        "groups.list",
    ]
    update = iam_pb2.UpdateRoleRequest(role=iam_pb2.Role(uid=role.uid, description="reads groups"))
    update.update_mask.paths.append("description")
    assert (
        await client.call(IAM + "Roles/UpdateRole", update, iam_pb2.Role, owner)
    ).description == "reads groups"

    listed = await client.call(
        IAM + "RoleBindings/ListRoleBindings",
        iam_pb2.ListRoleBindingsRequest(identity_uid=world.uids["viewer"]),
        iam_pb2.ListRoleBindingsResponse,
        owner,
    )
    (binding,) = listed.role_bindings
    assert binding.role.uid == ROLE_BY_NAME["viewer"].uid
    moved = iam_pb2.UpdateRoleBindingRequest(uid=binding.uid, role_uid=role.uid)
    moved.update_mask.paths.append("role_uid")
    answer = await client.call(IAM + "RoleBindings/UpdateRoleBinding", moved, iam_pb2.RoleBinding, owner)
    assert answer.role.name == "lister"

    code, status = await client.refusal(
        IAM + "Roles/DeleteRole", iam_pb2.DeleteRoleRequest(uid=role.uid), empty_pb2.Empty, owner
    )
    assert code == grpc.StatusCode.FAILED_PRECONDITION  # still bound: the JSON API's rule
    assert status["code"] == 9


async def test_identity_providers_and_account_associations(world: World, client: Client) -> None:
    """Providers and associations (a oneof of clouds) round-trip through gRPC as JSON resources."""
    owner = world.tokens["owner"]
    provider = await client.call(
        IAM + "IdentityProviders/CreateIdentityProvider",
        iam_pb2.CreateIdentityProviderRequest(
            parent=world.org.uid,
            identity_provider=iam_pb2.IdentityProvider(
                name="ci", oidc=iam_pb2.Oidc(issuer="https://token.actions.githubusercontent.com")
            ),
        ),
        iam_pb2.IdentityProvider,
        owner,
    )
    status, body = await world.call("GET", f"/iam/v2beta1/identityProviders/{provider.uid}")
    assert status == 200 and as_json(provider) == body

    association = await client.call(
        IAM + "AccountAssociations/CreateAccountAssociation",
        iam_pb2.CreateAccountAssociationRequest(
            parent=world.org.uid,
            account_association=iam_pb2.AccountAssociation(
                name="prod", amazon=iam_pb2.AmazonAccount(account="123456789012")
            ),
        ),
        iam_pb2.AccountAssociation,
        owner,
    )
    assert association.WhichOneof("account") == "amazon"
    await client.call(
        IAM + "IdentityProviders/DeleteIdentityProvider",
        iam_pb2.DeleteIdentityProviderRequest(uid=provider.uid),
        empty_pb2.Empty,
        owner,
    )
    status, _ = await world.call("GET", f"/iam/v2beta1/identityProviders/{provider.uid}")
    assert status == 404


async def test_a_group_invite_is_accepted_over_grpc(world: World, client: Client) -> None:
    """An owner's invite, accepted by an identity of another organization, binds it to the role."""
    invite = await client.call(
        IAM + "GroupInvites/CreateGroupInvite",
        iam_pb2.CreateGroupInviteRequest(parent=world.org.uid, role_uid=ROLE_BY_NAME["viewer"].uid),
        iam_pb2.GroupInvite,
        world.tokens["owner"],
    )
    assert invite.code and invite.single_use and invite.role.name == "viewer"
    binding = await client.call(
        IAM + "GroupInvites/AcceptGroupInvite",
        iam_pb2.AcceptGroupInviteRequest(uid=invite.uid, code=invite.code),
        iam_pb2.RoleBinding,
        world.tokens["outsider"],
    )
    assert (binding.identity.uid, binding.group.uid) == (world.uids["outsider"], world.org.uid)
    code, _ = await client.refusal(
        IAM + "GroupInvites/GetGroupInvite",
        iam_pb2.GetGroupInviteRequest(uid=invite.uid),
        iam_pb2.GroupInvite,
        world.tokens["owner"],
    )
    assert code == grpc.StatusCode.NOT_FOUND  # single use: gone once accepted


async def test_tags_and_advisories(world: World, client: Client) -> None:
    """A pushed image's tag and a seeded advisory are listed and read over gRPC."""
    repo = world.emulator.repo(world.org.uid, "app")
    world.emulator.registry.push(repo, "v1", tiny_image({"a.txt": b"a\n"}))
    advisory = world.emulator.advisory(
        repo.uid, {"vulnerabilityId": "CVE-2026-0042", "package": "zlib", "severity": "LOW"}
    )
    viewer = world.tokens["viewer"]
    tags = await client.call(
        "/registry.v2beta1.Tags/ListTags",
        registry_pb2.ListTagsRequest(uidp=iam_pb2.Uidp(children_of=repo.uid)),
        registry_pb2.ListTagsResponse,
        viewer,
    )
    (tag,) = tags.tags
    assert tag.name == "v1" and tag.digest.startswith("sha256:") and tag.size > 0
    got = await client.call(
        "/registry.v2beta1.Tags/GetTag", registry_pb2.GetTagRequest(uid=tag.uid), registry_pb2.Tag, viewer
    )
    assert as_json(got) == as_json(tag)
    advisories = await client.call(
        "/vulnerabilities.v2beta1.Advisories/ListAdvisories",
        vulnerabilities_pb2.ListAdvisoriesRequest(vulnerability_id="CVE-2026-0042"),
        vulnerabilities_pb2.ListAdvisoriesResponse,
        viewer,
    )
    assert [a.uid for a in advisories.advisories] == [advisory.uid]
    assert advisories.advisories[0].severity == "LOW"


async def test_a_viewer_cannot_create_an_identity_provider(world: World, client: Client) -> None:
    """The JSON API's access rules hold over gRPC for the new kinds too."""
    code, status = await client.refusal(
        IAM + "IdentityProviders/CreateIdentityProvider",
        iam_pb2.CreateIdentityProviderRequest(
            parent=world.org.uid,
            identity_provider=iam_pb2.IdentityProvider(name="x", oidc=iam_pb2.Oidc(issuer="https://x.test")),
        ),
        iam_pb2.IdentityProvider,
        world.tokens["viewer"],
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED and status["code"] == 7
