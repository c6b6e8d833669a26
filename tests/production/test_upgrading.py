"""docs/upgrading.md and CHANGELOG.md hold to the release: one version for the package, the images the
manifests pin and the changelog."""

from __future__ import annotations

import re

import yaml

from tokenrelay import __version__

from ..support.production import REPO

KUSTOMIZATIONS = ["deploy/base", "deploy/overlays/job", "deploy/injector/base"]


def test_manifests_pin_the_packages_version() -> None:
    """Every kustomization's image tag and the injector's TOKENRELAY_IMAGE are the package's version,
    so that the injector adds sidecars of its own version (the skew policy)."""
    for directory in KUSTOMIZATIONS:
        kustomization = yaml.safe_load((REPO / directory / "kustomization.yaml").read_text())
        assert {image["newTag"] for image in kustomization["images"]} == {__version__}, directory
    deployment = yaml.safe_load((REPO / "deploy" / "injector" / "base" / "deployment.yaml").read_text())
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TOKENRELAY_IMAGE"].rsplit(":", 1)[1] == __version__


def test_changelog_has_the_current_version_and_an_unreleased_section() -> None:
    """CHANGELOG.md has a section for the package's version and one for what is not released yet."""
    headings = re.findall(r"^## \[([^]]+)\]", (REPO / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert __version__ in headings


def test_the_stable_local_api_is_the_one_served() -> None:
    """The paths and error reasons docs/upgrading.md promises to keep are the ones the sidecar serves."""
    text = (REPO / "docs" / "upgrading.md").read_text()
    source = "\n".join(p.read_text() for p in (REPO / "src" / "tokenrelay").rglob("*.py"))
    for path in [*re.findall(r"`GET (/v1/[a-z]+)`", text), "/healthz", "/readyz"]:
        assert f'"{path}"' in source, path
    for reason in ("TOKEN_UNAVAILABLE", "AUDIENCE_NOT_CONFIGURED", "PEER_NOT_ALLOWED"):
        assert f"`{reason}`" in text and f'"{reason}"' in source, reason
