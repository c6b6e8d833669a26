"""The content store: blobs and manifests by sha256 digest, in memory or in a directory.

Uploads stream through a running sha256, so a digest is checked without reading the content twice,
and every write is bounded (``Limits``). Content is shared across repositories (identical layers are
kept once); which repository may see which digest is the catalog's business, not this module's.

Directory layout: ``sha256/<first 2 hex>/<64 hex>`` for content, ``uploads/<session>`` for uploads in
progress (moved into place by one rename once the digest checks out; leftovers are removed at start).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from aiohttp import web

from .errors import RegistryError

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    max_blob: int = 512 * MiB
    max_manifest: int = 4 * MiB  # distribution's own default
    max_uploads: int = 64  # sessions open at once
    upload_idle: float = 3600.0  # seconds an unfinished upload is kept without a request
    max_memory: int = 1024 * MiB  # all content and uploads together, without --state


class Upload:
    """One blob being uploaded: appended to in order, hashed as it goes."""

    def __init__(
        self, session: str, sink: BinaryIO | bytearray, limit: int, reserve: Callable[[int], None]
    ) -> None:
        self.session = session
        self._sink = sink
        self._hash = hashlib.sha256()
        self._limit = limit
        self._reserve = reserve
        self.size = 0

    def write(self, chunk: bytes) -> None:
        if self.size + len(chunk) > self._limit:
            raise RegistryError(
                "SIZE_INVALID",
                f"a blob may hold at most {self._limit} bytes in this emulator",
                status=413,
            )
        self._reserve(len(chunk))
        self._hash.update(chunk)
        if isinstance(self._sink, bytearray):
            self._sink.extend(chunk)
        else:
            self._sink.write(chunk)
        self.size += len(chunk)

    @property
    def digest(self) -> str:
        return "sha256:" + self._hash.hexdigest()


class Blobs:
    """Content by digest; ``directory`` None keeps it in memory."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.directory = Path(directory) if directory is not None else None
        self._memory: dict[str, bytes] = {}
        self._memory_used = 0  # content and uploads in progress, without a directory
        self._pending: dict[str, bytearray] = {}  # session -> bytes so far (memory only)
        self._files: dict[str, BinaryIO] = {}  # session -> open file (directory only)
        if self.directory is not None:
            shutil.rmtree(self.directory / "uploads", ignore_errors=True)
            (self.directory / "uploads").mkdir(parents=True, exist_ok=True)
            (self.directory / "sha256").mkdir(exist_ok=True)

    def _path(self, digest: str) -> Path:
        assert self.directory is not None
        hexdigits = digest.removeprefix("sha256:")
        return self.directory / "sha256" / hexdigits[:2] / hexdigits

    def size(self, digest: str) -> int | None:
        """The stored content's size, or None when absent."""
        if self.directory is None:
            data = self._memory.get(digest)
            return None if data is None else len(data)
        try:
            return self._path(digest).stat().st_size
        except OSError:
            return None

    def read(self, digest: str) -> bytes:
        """Small content (a manifest) whole; KeyError when absent."""
        if self.directory is None:
            return self._memory[digest]
        try:
            return self._path(digest).read_bytes()
        except OSError:
            raise KeyError(digest) from None

    def response(self, digest: str, headers: dict[str, str]) -> web.StreamResponse:
        """The content as a response body (a file response answers Range requests too)."""
        if self.directory is None:
            return web.Response(
                body=self._memory[digest], content_type="application/octet-stream", headers=headers
            )
        return web.FileResponse(
            self._path(digest), headers={"Content-Type": "application/octet-stream", **headers}
        )

    def _reserve_memory(self, size: int) -> None:
        if self._memory_used + size > self.limits.max_memory or self._memory_used >= self.limits.max_memory:
            raise RegistryError(
                "DENIED",
                f"the emulator keeps content in memory and may hold {self.limits.max_memory} bytes; "
                "start it with --state FILE to keep content on disk",
            )
        self._memory_used += size

    def _on_disk(self, size: int) -> None:
        """Disk space is the operator's business: nothing to reserve."""

    def start(self) -> Upload:
        session = secrets.token_hex(16)
        if self.directory is None:
            self._reserve_memory(0)  # refused at once when memory is full
            sink: BinaryIO | bytearray = self._pending.setdefault(session, bytearray())
            return Upload(session, sink, self.limits.max_blob, self._reserve_memory)
        sink = (self.directory / "uploads" / session).open("wb")
        self._files[session] = sink
        return Upload(session, sink, self.limits.max_blob, self._on_disk)

    def commit(self, upload: Upload, expected: str) -> None:
        """Keep the upload's content under ``expected``; DIGEST_INVALID when it hashes otherwise."""
        actual = upload.digest
        if actual != expected:
            self.discard(upload)
            raise RegistryError("DIGEST_INVALID", f"the content hashes to {actual}, not {expected}")
        if self.directory is None:
            data = bytes(self._pending.pop(upload.session))
            if actual in self._memory:
                self._memory_used -= len(data)  # the same content is kept once
            else:
                self._memory[actual] = data
            return
        self._files.pop(upload.session).close()
        target = self._path(actual)
        target.parent.mkdir(exist_ok=True)
        (self.directory / "uploads" / upload.session).replace(target)

    def discard(self, upload: Upload) -> None:
        if self.directory is None:
            self._memory_used -= len(self._pending.pop(upload.session, b""))
            return
        sink = self._files.pop(upload.session, None)
        if sink is not None:
            sink.close()
        with contextlib.suppress(FileNotFoundError):
            (self.directory / "uploads" / upload.session).unlink()

    def put(self, data: bytes) -> str:
        """Store ``data`` (a manifest, a seed image's blob); its digest."""
        upload = self.start()
        try:
            upload.write(data)
        except RegistryError:
            self.discard(upload)
            raise
        digest = upload.digest
        self.commit(upload, digest)
        return digest

    def close(self) -> None:
        for sink in self._files.values():
            sink.close()
        self._files.clear()
