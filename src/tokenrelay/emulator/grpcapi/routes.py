"""Where each gRPC method lands on the JSON API.

The methods follow the API's own patterns (AIP-131 to 135), so one rule per verb derives the HTTP
call from the method's name and its service's collection: ``List`` is ``GET <collection>`` with the
request's fields as query parameters, ``Get`` and ``Delete`` act on ``<collection>/<uid>``, ``Create``
posts to ``<collection>/<parent>``, and ``Update`` patches ``<collection>/<resource uid>`` with the
field mask as ``updateMask``. A method outside these patterns gets an explicit ``Route`` here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Route:
    """One gRPC method as an HTTP call.

    ``path`` is a template whose ``{field}`` (or ``{message.field}``) parts are taken from the request;
    ``body`` is None (no body), ``"*"`` (every request field not used in the path) or the name of the
    request field sent as the body. Fields used nowhere else become query parameters.
    """

    method: str
    path: str
    body: str | None = None


# service -> (the collection's path, the request field holding the resource)
COLLECTIONS: dict[str, tuple[str, str]] = {
    "iam.v2beta1.Groups": ("/iam/v2beta1/groups", "group"),
    "iam.v2beta1.Identities": ("/iam/v2beta1/identities", "identity"),
    "iam.v2beta1.Roles": ("/iam/v2beta1/roles", "role"),
    "iam.v2beta1.RoleBindings": ("/iam/v2beta1/roleBindings", "role_binding"),
    "iam.v2beta1.IdentityProviders": ("/iam/v2beta1/identityProviders", "identity_provider"),
    "iam.v2beta1.AccountAssociations": ("/iam/v2beta1/accountAssociations", "account_association"),
    "iam.v2beta1.GroupInvites": ("/iam/v2beta1/groupInvites", "group_invite"),
    "registry.v2beta1.Repos": ("/registry/v2beta1/repos", "repo"),
    "registry.v2beta1.Tags": ("/registry/v2beta1/tags", "tag"),
    "vulnerabilities.v2beta1.Advisories": ("/vulnerabilities/v2beta1/advisories", "advisory"),
}

# Updates whose request carries the changed fields beside the uid rather than in a resource message
# (a binding's role; an invite's expiry and use), and the invite's custom method (AIP-136).
EXPLICIT: dict[str, Route] = {
    "iam.v2beta1.RoleBindings/UpdateRoleBinding": Route("PATCH", "/iam/v2beta1/roleBindings/{uid}", "*"),
    "iam.v2beta1.GroupInvites/UpdateGroupInvite": Route("PATCH", "/iam/v2beta1/groupInvites/{uid}", "*"),
    "iam.v2beta1.GroupInvites/AcceptGroupInvite": Route(
        "POST", "/iam/v2beta1/groupInvites/{uid}:accept", "*"
    ),
}


class UnroutableMethod(ValueError):
    """A method whose name follows no verb pattern and has no explicit route: a bug in this table."""


def route_for(service: str, method: str, request_fields: frozenset[str]) -> Route:
    """The HTTP call for ``service``'s ``method`` whose request has ``request_fields``."""
    explicit = EXPLICIT.get(f"{service}/{method}")
    if explicit is not None:
        return explicit
    collection, resource = COLLECTIONS[service]
    if method.startswith("List"):
        return Route("GET", collection)
    if method.startswith("Get"):
        return Route("GET", collection + "/{uid}")
    if method.startswith("Delete"):
        return Route("DELETE", collection + "/{uid}")
    if method.startswith("Create"):
        body = resource if resource in request_fields else "*"
        return Route("POST", collection + "/{parent}", body)
    if method.startswith("Update"):
        return Route("PATCH", collection + "/{" + resource + ".uid}", resource)
    raise UnroutableMethod(f"{service}/{method}: no route; add one to routes.EXPLICIT")
