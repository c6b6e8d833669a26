"""The running sidecar's state: ``GET /v1/status`` on the local API, and ``tokenrelay status``.

The sidecar side (``StatusBoard``) turns every provider's ``Status`` into one JSON document; the
command side asks the socket for it and prints a table (or the JSON itself with ``--json``). Both
speak the same document, documented in README.md beside ``/v1/token``::

    {"version": "0.1.0", "startTime": "<RFC 3339>", "uptimeSeconds": 12.3,
     "idToken": {"source": "file /var/run/...", "expireTime": "<RFC 3339>" | null,
                 "expiresInSeconds": 540.0 | null, "lastReadTime": "<RFC 3339>" | null},
     "audiences": [{"audience": "https://api.example.com",
                    "fingerprint": "48c7433e" | null, "expireTime": ... | null,
                    "expiresInSeconds": ... | null, "state": "fresh" | "stale" | "expired" | "none",
                    "nextRefreshTime": ... | null, "nextRefreshInSeconds": ... | null,
                    "lastExchange": {"time": ..., "outcome": "ok" | "failed", "error": "..." | null} | null,
                    "consecutiveFailures": 0, "backoffSeconds": 0.0}]}

Never a token: fingerprints only. The command imports only the standard library.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..lite.timestamps import format_timestamp

if TYPE_CHECKING:
    import argparse

    from ..tokens.provider import Status


class StatusBoard:
    """What the sidecar knows beyond its providers: its start and the OIDC token it last read."""

    def __init__(
        self,
        id_token_source: str | Callable[[], str],  # a callable: auto's choice is known only later
        *,
        forward: Callable[[float | None], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._source = id_token_source if callable(id_token_source) else lambda: id_token_source
        self._forward = forward
        self._clock = clock
        self._wall = wall
        self._started = clock()
        self._started_wall = wall()
        self._id_token: tuple[float, float | None] | None = None  # (wall time read, its expiry)

    def id_token(self, expiry: float | None) -> None:
        """``Exchanger.on_id_token``: the OIDC token just read expires at ``expiry`` (None: not a JWT)."""
        self._id_token = (self._wall(), expiry)
        if self._forward is not None:
            self._forward(expiry)

    def document(self, statuses: Sequence[Status]) -> dict[str, Any]:
        """The /v1/status document for these provider states."""
        now, wall = self._clock(), self._wall()
        read, expiry = self._id_token or (None, None)
        return {
            "version": __version__,
            "startTime": format_timestamp(self._started_wall),
            "uptimeSeconds": round(now - self._started, 1),
            "idToken": {
                "source": self._source(),
                "expireTime": _time(expiry),
                "expiresInSeconds": None if expiry is None else round(expiry - wall, 1),
                "lastReadTime": _time(read),
            },
            "audiences": [_audience(status, now, wall) for status in statuses],
        }


def _time(moment: float | None) -> str | None:
    if moment is None:
        return None
    try:
        return format_timestamp(moment)
    except (ValueError, OverflowError, OSError):  # a claim past year 9999: show none rather than fail
        return None


def _audience(status: Status, now: float, wall: float) -> dict[str, Any]:
    token = status.token
    last = None
    if status.last_exchange_wall is not None:
        last = {
            "time": format_timestamp(status.last_exchange_wall),
            "outcome": "ok" if status.last_exchange_ok else "failed",
            "error": None if status.last_exchange_ok else status.error,
        }
    due = status.next_refresh_in
    return {
        "audience": status.audience,
        "fingerprint": token.fingerprint if token else None,
        "expireTime": token.expire_time if token else None,
        "expiresInSeconds": round(token.remaining(now), 1) if token else None,
        "state": token.state(now).value if token else "none",
        "nextRefreshTime": None if due is None else _time(wall + due),
        "nextRefreshInSeconds": None if due is None else round(due, 1),
        "lastExchange": last,
        "consecutiveFailures": status.consecutive_failures,
        "backoffSeconds": round(status.retry_in, 1),
    }


# -- tokenrelay status ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..lite.socketclient import DEFAULT_SOCKET

    parser.add_argument(
        "--socket",
        metavar="PATH",
        help=f"the sidecar's socket [env TOKENRELAY_SOCKET, default {DEFAULT_SOCKET}]",
    )
    parser.add_argument("--json", action="store_true", help="print the /v1/status JSON document")


def run(args: argparse.Namespace) -> int:
    from ..lite.socketclient import LocalApiError, request, socket_path

    path = socket_path(args.socket)
    try:
        status, body = request(path, "/v1/status", timeout=10.0)
        if status != 200:
            raise LocalApiError(
                f"the tokenrelay sidecar at {path} answered HTTP {status} to /v1/status"
                + ("; it predates /v1/status: upgrade it" if status == 404 else "")
            )
        document = json.loads(body)
    except LocalApiError as exc:
        print(f"tokenrelay status: {exc}", file=sys.stderr)
        return 1
    except ValueError:
        print(f"tokenrelay status: the sidecar at {path} answered a body that is not JSON", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(render(document))
    return 0


def render(document: Mapping[str, Any]) -> str:
    """The table ``tokenrelay status`` prints."""
    id_token = document.get("idToken") or {}
    lines = [
        f"tokenrelay {document.get('version')}, up {_duration(document.get('uptimeSeconds'))} "
        f"(since {document.get('startTime')})",
        f"OIDC token ({id_token.get('source')}): "
        + (
            f"expires {id_token['expireTime']} ({_relative(id_token.get('expiresInSeconds'))})"
            if id_token.get("expireTime")
            else ("not read yet" if not id_token.get("lastReadTime") else "no expiry (not a JWT)")
        ),
        "",
    ]
    header = ("AUDIENCE", "TOKEN", "EXPIRES", "NEXT REFRESH", "LAST EXCHANGE", "FAILURES", "BACKOFF")
    rows = [header]
    errors = []
    for entry in document.get("audiences", []):
        last = entry.get("lastExchange")
        expires = entry.get("expireTime")
        rows.append(
            (
                str(entry.get("audience")),
                entry.get("fingerprint") or "-",
                f"{expires} ({_relative(entry.get('expiresInSeconds'))})" if expires else "-",
                _relative(entry.get("nextRefreshInSeconds")) if entry.get("nextRefreshTime") else "now",
                f"{last['time']} {last['outcome']}" if last else "-",
                str(entry.get("consecutiveFailures", 0)),
                f"{entry.get('backoffSeconds', 0):g}s",
            )
        )
        if last and last.get("error"):
            errors.append(f"{entry.get('audience')}: {last['error']}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if errors:
        lines += ["", "last errors:", *(f"  {line}" for line in errors)]
    return "\n".join(lines) + "\n"


def _duration(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _relative(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    return f"in {_duration(seconds)}" if seconds >= 0 else f"{_duration(-seconds)} ago"
