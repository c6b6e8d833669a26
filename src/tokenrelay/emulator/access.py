"""Who may do what: built-in roles, their permissions, and the check against role bindings.

The upstream document names only the ``viewer`` role and leaves permissions "not shown"; the table
below is the emulator's choice (published in docs/emulator.md). A binding grants its role's
permissions on its group and on everything below it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import permission_denied
from .model import Role, is_within, role_uid
from .store import Store

READ = frozenset(
    {
        "groups.list",
        "groups.get",
        "identities.list",
        "identities.get",
        "role_bindings.list",
        "repos.list",
        "repos.get",
        "repos.pull",
        "tags.list",
        "tags.get",
    }
)
EDIT = READ | {"groups.create", "groups.update", "groups.delete", "repos.push"}
OWN = EDIT | {"identities.create", "identities.delete", "role_bindings.create", "role_bindings.delete"}

ROLES: dict[str, Role] = {
    role.uid: role
    for role in (
        Role(role_uid("viewer"), "viewer", "Read every resource in the group and below it.", READ),
        Role(
            role_uid("editor"), "editor", "viewer, plus create, update and delete groups, push images.", EDIT
        ),
        Role(
            role_uid("owner"),
            "owner",
            "editor, plus manage identities and role bindings (who has access).",
            OWN,
        ),
    )
}
ROLE_BY_NAME = {role.name: role for role in ROLES.values()}


def scopes(store: Store, identity_uid: str, permission: str) -> list[str]:
    """The group uids where ``identity_uid`` holds ``permission`` (each covers its descendants)."""
    return [
        binding.group
        for binding in store.bindings_of(identity_uid)
        if permission in ROLES[binding.role].permissions
    ]


def allowed(scope_list: Iterable[str], group_uid: str) -> bool:
    return any(is_within(group_uid, scope) for scope in scope_list)


def require(store: Store, identity_uid: str, permission: str, group_uid: str) -> None:
    """PERMISSION_DENIED unless a binding on ``group_uid`` or an ancestor grants ``permission``."""
    if not allowed(scopes(store, identity_uid, permission), group_uid):
        raise permission_denied(f"Permission denied: {permission} on {group_uid}")
