"""Advisories: read-only over the API, seeded by the operator (Python, ``--seed`` or the loopback
``POST /emulator/v1/advisories/<repo uid>``). An advisory lives under the repo it concerns: its uid is
``<repo uid>/<16 hex>``, so ``uidp.descendants_of`` a group finds the advisories of its repos.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import VULNERABILITIES_DOMAIN, not_found
from ..inputs import MAX_NAME, Fields
from .kinds import Advisory
from .resources import Resources

SEVERITIES = ("UNKNOWN", "LOW", "MEDIUM", "HIGH", "CRITICAL")
STATUSES = ("UNDER_INVESTIGATION", "AFFECTED", "FIXED", "NOT_AFFECTED")
VULNERABILITY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
INPUT = ("vulnerabilityId", "aliases", "package", "severity", "status", "fixedVersion", "summary")


def _choice(fields: Fields, field: str, choices: tuple[str, ...]) -> str:
    value = fields.body.get(field, choices[0])
    if value not in choices:
        fields.add(field, f"one of {', '.join(choices)}")
        return choices[0]
    return str(value)


def create_advisory(resources: Resources, repo_uid: str, body: Mapping[str, Any]) -> Advisory:
    """An advisory about repo ``repo_uid``; code 3 naming every bad field."""
    if repo_uid not in resources.store.repos:
        raise not_found(f"Not found: repo {repo_uid}", VULNERABILITIES_DOMAIN)
    fields = Fields(body, INPUT, VULNERABILITIES_DOMAIN)
    vulnerability_id = fields.pattern("vulnerabilityId", VULNERABILITY_ID, "an id like CVE-2026-12345")
    aliases = fields.strings("aliases")
    for index, alias in enumerate(aliases):
        if VULNERABILITY_ID.fullmatch(alias) is None:
            fields.add(f"aliases[{index}]", "an id like GHSA-xxxx-xxxx-xxxx")
    package = fields.text("package", required=True, limit=MAX_NAME)
    severity = _choice(fields, "severity", SEVERITIES)
    status = _choice(fields, "status", STATUSES)
    fixed_version = fields.text("fixedVersion", limit=MAX_NAME)
    if status == "FIXED" and not fixed_version:
        fields.add("fixedVersion", "required when status is FIXED")
    summary = fields.text("summary")
    fields.check()
    now = resources.now_ms()
    advisory = Advisory(
        resources.new_uid(repo_uid),
        vulnerability_id,
        list(aliases),
        package,
        severity,
        status,
        fixed_version,
        summary,
        now,
        now,
    )
    resources.store.put(advisory)
    return advisory
