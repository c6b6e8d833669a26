"""Where each gRPC method lands on the JSON API.

The services follow the API's own patterns (AIP-131 to 135), so the HTTP call is derived from the
descriptors alone. A service's collection is its package and name as a path (``iam.v2beta1.RoleBindings``:
``/iam/v2beta1/roleBindings``, the path of an ``api.Kind``). One rule per verb: ``List`` is ``GET
<collection>`` with the request's fields as query parameters, ``Get`` and ``Delete`` act on
``<collection>/<uid>``, ``Create`` posts to ``<collection>/<parent>``, and ``Update`` patches
``<collection>/<resource uid>`` with the field mask as ``updateMask`` (the resource is the request's
field of the type the method returns; without one, the request's other fields are the change and its
``uid`` names the resource). A method outside these patterns gets an explicit ``Route`` here.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor


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


# Custom methods (AIP-136).
EXPLICIT: dict[str, Route] = {
    "iam.v2beta1.GroupInvites/AcceptGroupInvite": Route(
        "POST", "/iam/v2beta1/groupInvites/{uid}:accept", "*"
    ),
}


class UnroutableMethod(ValueError):
    """A method whose name follows no verb pattern and has no explicit route: a bug in this table."""


def collection(service: ServiceDescriptor) -> str:
    """``iam.v2beta1.RoleBindings`` -> ``/iam/v2beta1/roleBindings``."""
    package = service.file.package.replace(".", "/")
    return f"/{package}/{service.name[0].lower()}{service.name[1:]}"


def route_for(service: ServiceDescriptor, method: MethodDescriptor) -> Route:
    """The HTTP call for ``service``'s ``method``."""
    name = method.name
    explicit = EXPLICIT.get(f"{service.full_name}/{name}")
    if explicit is not None:
        return explicit
    path = collection(service)
    # the request's field holding the resource itself (CreateGroupRequest.group), if it has one
    answer = method.output_type.full_name
    resource = next(
        (f.name for f in method.input_type.fields if f.message_type and f.message_type.full_name == answer),
        None,
    )
    if name.startswith("List"):
        return Route("GET", path)
    if name.startswith("Get"):
        return Route("GET", path + "/{uid}")
    if name.startswith("Delete"):
        return Route("DELETE", path + "/{uid}")
    if name.startswith("Create"):
        return Route("POST", path + "/{parent}", resource or "*")
    if name.startswith("Update") and resource is not None:
        return Route("PATCH", path + "/{" + resource + ".uid}", resource)
    if name.startswith("Update"):  # the changed fields beside the uid: a binding's role, an invite's expiry
        return Route("PATCH", path + "/{uid}", "*")
    raise UnroutableMethod(f"{service.full_name}/{name}: no route; add one to routes.EXPLICIT")
