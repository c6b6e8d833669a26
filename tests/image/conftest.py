from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..support.image import Image, built_image


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    """The image built from the Dockerfile, once per session, on a private engine."""
    with built_image() as built:
        yield built
