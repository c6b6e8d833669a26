"""Timestamps in the upstream's form: ISO 8601, UTC, millisecond precision, ``Z`` suffix."""

from __future__ import annotations

from datetime import UTC, datetime


def format_timestamp(epoch_seconds: float) -> str:
    """``2026-11-21T12:00:00.000Z`` for a Unix time."""
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> float:
    """Unix time from an ISO 8601 timestamp; raises ValueError on anything else."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return moment.timestamp()
