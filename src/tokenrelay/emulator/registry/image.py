"""A small image built in-process: one gzipped layer tarball, its config and an OCI manifest.

Byte-for-byte reproducible (fixed times, sorted entries, gzip without a timestamp), so the seed image
of ``tokenrelay dev`` has the same digest on every run and on every machine.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass

from .manifests import OCI_MANIFEST

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
EPOCH = "1970-01-01T00:00:00Z"


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Image:
    blobs: tuple[bytes, ...]  # the config, then the layers
    manifest: bytes
    media_type: str = OCI_MANIFEST

    @property
    def digest(self) -> str:
        return digest_of(self.manifest)


def layer(files: dict[str, bytes]) -> tuple[bytes, bytes]:
    """``(uncompressed tar, gzipped tar)`` holding ``files`` (path -> content, mode 0644, owner root)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(files[path]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[path]))
    return raw.getvalue(), gzip.compress(raw.getvalue(), mtime=0)


def tiny_image(files: dict[str, bytes], cmd: list[str] | None = None, arch: str = "amd64") -> Image:
    """A one-layer linux image with ``files``; ``cmd`` is its default command."""
    tar, gz = layer(files)
    config = json.dumps(
        {
            "created": EPOCH,
            "architecture": arch,
            "os": "linux",
            "config": {"Cmd": cmd or []},
            "rootfs": {"type": "layers", "diff_ids": [digest_of(tar)]},
            "history": [{"created": EPOCH, "created_by": "tokenrelay (built in-process)"}],
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": CONFIG_TYPE, "digest": digest_of(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": digest_of(gz), "size": len(gz)}],
        },
        sort_keys=True,
    ).encode()
    return Image((config, gz), manifest)
