"""Identity providers: OIDC issuers a group trusts for the identities in it and below.

An identity provider's ``oidc.issuer`` is trusted by the token service for the identities of its group
and every group below it (no ``--trust-issuer`` needed); deleting it ends that trust.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import IAM_DOMAIN
from ..inputs import MAX_NAME, Fields
from ..model import is_within, parent_of
from . import groups
from .kinds import IdentityProvider
from .patching import Violations, merge
from .resources import Resources
from .store import Store

KNOWN = ("name", "description", "oidc", "uid", "createTime", "updateTime")
UPDATABLE = ("name", "description", "oidc", "oidc.issuer")


def trusted_issuers(store: Store, identity_uid: str) -> frozenset[str]:
    """Issuers of the identity providers of the identity's group and its ancestors."""
    group = parent_of(identity_uid)
    return frozenset(
        p.issuer.rstrip("/") for p in store.identity_providers.values() if is_within(group, parent_of(p.uid))
    )


def get(res: Resources, uid: str) -> IdentityProvider:
    return res.find(IdentityProvider, uid)


def _fields(body: Mapping[str, Any], violations: Violations) -> tuple[str, str, str]:
    fields = Fields(body, KNOWN, IAM_DOMAIN, violations=violations)
    name = fields.text("name", required=True, limit=MAX_NAME)
    description = fields.text("description")
    oidc = fields.nested("oidc", ("issuer",), required=True)
    issuer = oidc.url("issuer", "the issuer URL of the OIDC tokens to trust") if oidc is not None else ""
    fields.check()
    return name, description, issuer


def create(res: Resources, group_uid: str, body: Mapping[str, Any]) -> IdentityProvider:
    groups.get(res, group_uid)
    name, description, issuer = _fields(body, [])
    now = res.now_ms()
    provider = IdentityProvider(res.new_uid(group_uid), name, description, issuer, now, now)
    res.store.put(provider)
    return provider


def patch(res: Resources, uid: str, body: Mapping[str, Any], update_mask: str | None) -> IdentityProvider:
    provider = get(res, uid)
    current = {
        "name": provider.name,
        "description": provider.description,
        "oidc": {"issuer": provider.issuer},
    }
    merged, changed, violations = merge(current, body, update_mask, UPDATABLE, KNOWN)
    name, description, issuer = _fields(merged, violations)
    if changed:
        provider.name, provider.description, provider.issuer = name, description, issuer
        provider.update_ms = res.now_ms()
        res.store.put(provider)
    return provider


def delete(res: Resources, uid: str) -> None:
    res.store.remove(get(res, uid))
