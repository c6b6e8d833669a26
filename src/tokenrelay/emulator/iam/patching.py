"""PATCH semantics for every resource: the document's rules 3 and 4, generalised.

A PATCH is turned into the resource's *input form* after the change, which the resource's create
validation then checks in full, so a field can never be set by PATCH to a value create refuses.
Without ``updateMask`` the updatable fields present in the body change (an object field is merged one
level deep); output-only and immutable fields are ignored. With ``updateMask`` exactly the listed
paths change (``a`` or ``a.b``); a listed path absent from the body is cleared (AIP-134); a path that
is not updatable is refused, naming ``updateMask``.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import Any

Violations = list[tuple[str, str]]


def merge(
    current: dict[str, Any],
    body: Mapping[str, Any],
    mask: str | None,
    updatable: Collection[str],
    known: Collection[str],
) -> tuple[dict[str, Any], bool, Violations]:
    """``(input form after the change, whether anything is to change, violations so far)``."""
    violations: Violations = [
        (key, f"unknown field; known fields: {', '.join(sorted(known))}") for key in body if key not in known
    ]
    merged = copy.deepcopy(current)
    if mask is None:
        paths = [key for key in body if key in updatable]
        for key in paths:
            value, before = body[key], merged.get(key)
            if isinstance(value, Mapping) and isinstance(before, dict):
                merged[key] = {**before, **value}
            else:
                merged[key] = value
        return merged, bool(paths), violations
    paths = [part.strip() for part in mask.split(",") if part.strip()]
    for path in paths:
        if path not in updatable:
            violations.append(
                ("updateMask", f"{path!r} cannot be updated; updatable: {', '.join(sorted(updatable))}")
            )
            continue
        head, _, tail = path.partition(".")
        if not tail:
            if head in body:
                merged[head] = body[head]
            else:
                merged.pop(head, None)
            continue
        source = body.get(head)
        target = merged.get(head)
        if not isinstance(target, dict):
            target = merged[head] = {}
        if isinstance(source, Mapping) and tail in source:
            target[tail] = source[tail]
        else:
            target.pop(tail, None)
    return merged, bool(paths), violations
