"""Checks of a running sidecar, from where the doctor runs: its socket (there, a socket, its mode and
owner, whether this user may connect, peer-credential allow-lists included) and a token for each
audience it keeps, with its expiry."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..lite import socketclient as client
from ..lite.redact import fingerprint
from ..lite.socketclient import LocalApiError
from ..lite.timestamps import parse_timestamp
from .report import Check, failed, passed, warning


@dataclass(slots=True)
class Sidecar:
    """What the doctor learnt of the sidecar: its checks, and its /v1/status document when it answered."""

    checks: list[Check] = field(default_factory=list)
    status: dict[str, Any] | None = None

    @property
    def audiences(self) -> tuple[str, ...] | None:
        if self.status is None:
            return None
        return tuple(str(entry.get("audience")) for entry in self.status.get("audiences", []))


def _ids() -> tuple[int, set[int]]:
    return os.geteuid(), {os.getegid(), *os.getgroups()}


def _may_connect(info: os.stat_result, uid: int, gids: set[int]) -> bool:
    """Connecting to a Unix socket needs write permission on its file."""
    if uid == 0:
        return True
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IWUSR)
    if info.st_gid in gids:
        return bool(info.st_mode & stat.S_IWGRP)
    return bool(info.st_mode & stat.S_IWOTH)


async def check(path: str, *, needed: bool) -> Sidecar:
    """``needed``: no settings to exchange with here, so the sidecar is the only way to a token."""
    found = Sidecar()
    try:
        info = await asyncio.to_thread(Path(path).stat)
    except FileNotFoundError:
        why = f"no socket at {path}: no sidecar runs here, or it listens elsewhere"
        fix = (
            "start `tokenrelay run`; in a pod, mount the socket's volume in both containers at the same "
            "path; or point --socket / TOKENRELAY_SOCKET at the sidecar's socket"
        )
        found.checks.append(
            failed("sidecar.socket", why, fix) if needed else warning("sidecar.socket", why, fix)
        )
        return found
    except PermissionError:
        found.checks.append(
            failed(
                "sidecar.socket",
                f"cannot look at {path}: a directory above it is closed to this user",
                "give this user search (x) permission on the socket's directories, e.g. mount the "
                "socket's volume with an fsGroup both containers share",
            )
        )
        return found
    if not stat.S_ISSOCK(info.st_mode):
        found.checks.append(
            failed(
                "sidecar.socket",
                f"{path} is not a socket",
                "point --socket / TOKENRELAY_SOCKET at the sidecar's socket (tokenrelay run --socket)",
            )
        )
        return found
    uid, gids = _ids()
    mode = stat.S_IMODE(info.st_mode)
    owner = f"mode {mode:04o}, owner uid {info.st_uid} gid {info.st_gid}"
    found.checks.append(passed("sidecar.socket", f"a socket at {path}", mode=f"{mode:04o}"))
    if not _may_connect(info, uid, gids):
        found.checks.append(
            failed(
                "sidecar.permissions",
                f"{path} has {owner}: this user (uid {uid}, groups {sorted(gids)}) may not connect",
                f"run this process as uid {info.st_uid}, or start the sidecar with --socket-mode 0660 "
                f"and give this user the group {info.st_gid} (in Kubernetes: the same runAsUser, or a "
                "shared fsGroup)",
                mode=f"{mode:04o}",
                owner=info.st_uid,
                group=info.st_gid,
            )
        )
        return found
    found.checks.append(passed("sidecar.permissions", f"{owner}: this user (uid {uid}) may connect"))
    await _status(found, path, uid, gids)
    if found.status is not None:
        for number, audience in enumerate(found.audiences or ()):
            found.checks.append(await _token(path, number, audience))
    return found


async def _status(found: Sidecar, path: str, uid: int, gids: set[int]) -> None:
    try:
        status, body = await asyncio.to_thread(client.request, path, "/v1/status", 10.0)
    except LocalApiError as exc:
        found.checks.append(failed("sidecar.connect", str(exc), "check that `tokenrelay run` is healthy"))
        return
    if status == 403:
        found.checks.append(
            failed(
                "sidecar.connect",
                f"the sidecar refuses this user (uid {uid}): its peer-credential allow-list does not name it",
                f"add --socket-allow-uid {uid} (env TOKENRELAY_SOCKET_ALLOW_UID) to `tokenrelay run`, or "
                f"--socket-allow-gid with one of this user's groups ({', '.join(map(str, sorted(gids)))})",
                uid=uid,
            )
        )
        return
    if status == 404:
        found.checks.append(
            warning(
                "sidecar.connect",
                f"the sidecar at {path} answers but has no /v1/status: an older tokenrelay",
                "upgrade the sidecar to see its audiences and state here",
            )
        )
        return
    try:
        document = json.loads(body)
        assert isinstance(document, dict)
    except (ValueError, AssertionError):
        found.checks.append(
            failed(
                "sidecar.connect",
                f"the process at {path} does not answer like tokenrelay (HTTP {status})",
                "point --socket / TOKENRELAY_SOCKET at tokenrelay's socket",
            )
        )
        return
    found.status = document
    found.checks.append(
        passed(
            "sidecar.connect",
            f"tokenrelay {document.get('version')} answers, up {document.get('uptimeSeconds')}s, "
            f"audiences: {', '.join(found.audiences or ())}",
        )
    )


async def _token(path: str, number: int, audience: str) -> Check:
    name = f"sidecar.token.{number}"
    try:
        reply = await asyncio.to_thread(client.fetch_token, path, audience, 15.0)
    except LocalApiError as exc:
        return failed(
            name,
            f"the sidecar has no token for audience {audience}: {exc}",
            "fix the cause it gives (the exchange checks above name it); `tokenrelay status` shows "
            "the failures and the backoff",
            audience=audience,
        )
    left = ""
    with contextlib.suppress(ValueError):
        left = f", in {parse_timestamp(reply.expire_time) - time.time():.0f}s"
    return passed(
        name,
        f"serves a token for audience {audience}: {fingerprint(reply.token)}, expires "
        f"{reply.expire_time}{left}",
        audience=audience,
        fingerprint=fingerprint(reply.token),
        expireTime=reply.expire_time,
    )
