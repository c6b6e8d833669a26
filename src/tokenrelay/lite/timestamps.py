"""Timestamps in the upstream's form: ISO 8601, UTC, millisecond precision, ``Z`` suffix."""

from __future__ import annotations

from datetime import UTC, datetime

_LAST = 253402300799.999  # 9999-12-31T23:59:59.999Z


def format_timestamp(epoch_seconds: float) -> str:
    """``2026-11-21T12:00:00.000Z`` for a Unix time, held within 1970 to 9999 (what the form can show)."""
    if not epoch_seconds >= 0.0:  # also NaN
        epoch_seconds = 0.0
    moment = datetime.fromtimestamp(min(epoch_seconds, _LAST), tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> float:
    """Unix time from an ISO 8601 timestamp; raises ValueError on anything else."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return moment.timestamp()
