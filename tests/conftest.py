"""Fixtures any test directory may use: the real Kubernetes API server (tests/support/k8s.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from .support import k8s

# pytest sets a session fixture up again for every test that asks after it failed: one attempt is enough
_failed: list[str] = []


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[k8s.ControlPlane]:
    """etcd and kube-apiserver, started once per session and stopped whatever happens; skips (fails
    under CI) when the binaries are not to be found, saying why."""
    if _failed:
        pytest.fail(_failed[0], pytrace=False)
    directory = tmp_path_factory.mktemp("k8s")
    assets = k8s.find_assets(directory)
    if isinstance(assets, str):
        k8s.unavailable(assets)
    assert isinstance(assets, k8s.Assets)
    try:
        plane = k8s.start(directory / "cluster", assets)
    except RuntimeError as first:
        try:  # once more, on other ports: a free port may have been taken between choosing and binding
            plane = k8s.start(directory / "again", assets)
        except RuntimeError as exc:
            _failed.append(f"the Kubernetes control plane did not start: {exc} (first attempt: {first})")
            raise
    try:
        yield plane
    finally:
        plane.stop()
        # pytest keeps the last sessions' temporary directories: not 130 MB of binary and etcd's data each
        for big in (directory / "kube-apiserver", plane.directory / "etcd"):
            if big.is_dir():
                shutil.rmtree(big, ignore_errors=True)
            else:
                big.unlink(missing_ok=True)
