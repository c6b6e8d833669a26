from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..support.image import Image, built_image, with_extras


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    """The image built from the Dockerfile, once per session, on a private engine."""
    with built_image() as built:
        yield built


@pytest.fixture(scope="session")
def image_with_extras(image: Image) -> Image:
    """The same Dockerfile built with ``--build-arg EXTRAS=aws,spiffe``, when a test asks for it."""
    return with_extras(image)
