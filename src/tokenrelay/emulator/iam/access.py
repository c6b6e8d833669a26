"""Who may do what: built-in roles, their permissions, and the check against role bindings.

The upstream document names only the ``viewer`` role and leaves permissions "not shown"; the table
below is the emulator's choice (published in docs/emulator.md). A binding grants its role's
permissions on its group and on everything below it. Custom roles (``store.roles``) name any of
these permissions as their ``capabilities``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import IAM_DOMAIN, permission_denied
from ..model import Writer, is_within, role_uid
from .kinds import RECORDS, Role
from .store import Store


def _ops(kinds: Iterable[str], *verbs: str) -> frozenset[str]:
    return frozenset(f"{kind}.{verb}" for kind in kinds for verb in verbs)


def _written_by(role: Writer) -> tuple[str, ...]:
    return tuple(kind.table() for kind in RECORDS if role == kind.WRITER)


# every kind is readable; the registry's tags are an API kind the store does not keep
READ = _ops((*(kind.table() for kind in RECORDS), "tags"), "list", "get") | {"repos.pull"}
EDIT = READ | _ops(_written_by("editor"), "create", "update", "delete") | {"repos.push"}
OWN = EDIT | _ops(_written_by("owner"), "create", "update", "delete")
PERMISSIONS = OWN  # what a custom role's capabilities may name

ROLES: dict[str, Role] = {
    role.uid: role
    for role in (
        Role(
            role_uid("viewer"),
            "viewer",
            "Read every resource in the group and below it.",
            tuple(sorted(READ)),
        ),
        Role(
            role_uid("editor"),
            "editor",
            "viewer, plus create, update and delete groups and account associations; push images.",
            tuple(sorted(EDIT)),
        ),
        Role(
            role_uid("owner"),
            "owner",
            "editor, plus manage identities, identity providers, roles, role bindings and group invites "
            "(who has access).",
            tuple(sorted(OWN)),
        ),
    )
}
ROLE_BY_NAME = {role.name: role for role in ROLES.values()}


def role(store: Store, uid: str) -> Role | None:
    """A built-in or custom role by uid."""
    return ROLES.get(uid) or store.roles.get(uid)


def scopes(store: Store, identity_uid: str, permission: str) -> list[str]:
    """The group uids where ``identity_uid`` holds ``permission`` (each covers its descendants)."""
    found = []
    for binding in store.bindings_of(identity_uid):
        bound = role(store, binding.role)
        if bound is not None and permission in bound.permissions:
            found.append(binding.group)
    return found


def allowed(scope_list: Iterable[str], group_uid: str) -> bool:
    return any(is_within(group_uid, scope) for scope in scope_list)


def require(
    store: Store, identity_uid: str, permission: str, group_uid: str, domain: str = IAM_DOMAIN
) -> None:
    """PERMISSION_DENIED unless a binding on ``group_uid`` or an ancestor grants ``permission``."""
    if not allowed(scopes(store, identity_uid, permission), group_uid):
        raise permission_denied(f"Permission denied: {permission} on {group_uid}", domain)
