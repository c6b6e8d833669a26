"""The doctor's findings: one ``Check`` per line, printed for people or as JSON for machines.

The JSON document (``tokenrelay doctor --json``)::

    {"ok": true | false,
     "summary": {"passed": 9, "failed": 0, "warning": 1, "skipped": 2},
     "checks": [{"id": "oidc.expiry", "group": "oidc", "status": "passed" | "failed" | "warning" | "skipped",
                 "message": "...", "fix": "..." | null, "details": {...}}]}

``ok`` is false exactly when a check failed (the exit status is then 1); warnings do not fail.
``id`` is stable (scripts may match on it); ``details`` carries what the check saw (claims,
fingerprints, paths), never a token.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from ..lite.redact import scrub


class Outcome(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    WARNING = "warning"
    SKIPPED = "skipped"


_MARK = {Outcome.PASSED: "ok  ", Outcome.FAILED: "FAIL", Outcome.WARNING: "warn", Outcome.SKIPPED: "skip"}


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: what was checked, how it went, and for a failure or warning what to do."""

    id: str  # "<group>.<name>", stable
    outcome: Outcome
    message: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return self.id.partition(".")[0]


def passed(id: str, message: str, **details: Any) -> Check:
    return Check(id, Outcome.PASSED, message, None, details)


def failed(id: str, message: str, fix: str, **details: Any) -> Check:
    return Check(id, Outcome.FAILED, message, fix, details)


def warning(id: str, message: str, fix: str, **details: Any) -> Check:
    return Check(id, Outcome.WARNING, message, fix, details)


def skipped(id: str, message: str, fix: str | None = None, **details: Any) -> Check:
    return Check(id, Outcome.SKIPPED, message, fix, details)


class Report:
    """Every check, in the order they ran."""

    def __init__(self) -> None:
        self.checks: list[Check] = []

    def add(self, *checks: Check) -> None:
        self.checks.extend(checks)

    @property
    def ok(self) -> bool:
        return not any(check.outcome is Outcome.FAILED for check in self.checks)

    def exit_status(self) -> int:
        return 0 if self.ok else 1

    def summary(self) -> dict[str, int]:
        counts = {outcome.value: 0 for outcome in Outcome}
        for check in self.checks:
            counts[check.outcome.value] += 1
        return counts

    def text(self) -> str:
        """One line per check; a failure's or warning's fix indented below it."""
        lines = []
        for check in self.checks:
            lines.append(f"{_MARK[check.outcome]}  {check.id}: {scrub(check.message)}")
            if check.fix and check.outcome is not Outcome.PASSED:
                lines.extend(
                    f"        fix: {line}" if i == 0 else f"             {line}"
                    for i, line in enumerate(scrub(check.fix).splitlines())
                )
        counts = self.summary()
        verdict = "everything needed works" if self.ok else "something needed does not work"
        lines.append(
            f"{verdict}: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['warning']} warnings, {counts['skipped']} skipped"
        )
        return "\n".join(lines) + "\n"

    def document(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "checks": [
                {
                    "id": check.id,
                    "group": check.group,
                    "status": check.outcome.value,
                    "message": scrub(check.message),
                    "fix": None if check.fix is None else scrub(check.fix),
                    "details": check.details,
                }
                for check in self.checks
            ],
        }

    def json(self) -> str:
        return json.dumps(self.document(), indent=2) + "\n"
