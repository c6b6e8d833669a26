"""Whether an extra of tokenrelay's is installed, and the one command that installs it.

Standard library only, and nothing imported until asked: run's settings (``sidecar.settings``) read
the table of OIDC sources, whose ``missing`` asks here.

In the container image an extra is not a pip command (the image has no pip) but a build argument:
its builder stage records the extras it installed in ``IMAGE_EXTRAS_FILE`` at the virtualenv's root
(``python -m tokenrelay.imagebuild``), and ``install`` then names ``--build-arg EXTRAS``.
"""

from __future__ import annotations

import sys

IMAGE_EXTRAS_FILE = "tokenrelay-image-extras"
BUILD_ARG = "EXTRAS"


def install(extra: str, prefix: str | None = None) -> str:
    """What a user does to get ``extra``: ``pip install 'tokenrelay[EXTRA]'``, or in the image (its
    virtualenv at ``prefix``, default this interpreter's) a rebuild with the extra added to ``EXTRAS``."""
    built = image_extras(sys.prefix if prefix is None else prefix)
    if built is None:
        return f"pip install 'tokenrelay[{extra}]'"
    wanted = ",".join([*built, extra] if extra not in built else built)
    return (
        f"this image was built without it: build it again with --build-arg {BUILD_ARG}={wanted} "
        "(docs/operations.md#extras)"
    )


def image_extras(prefix: str) -> list[str] | None:
    """The extras the image's build installed into the virtualenv at ``prefix``; None outside the image."""
    try:  # pathlib costs the helpers' start-up
        with open(f"{prefix}/{IMAGE_EXTRAS_FILE}", encoding="utf-8") as recorded:  # noqa: PTH123
            text = recorded.read()
    except OSError:
        return None
    return [name for name in text.split() if name]


def missing(module: str, extra: str) -> str | None:
    """``install(extra)`` when ``module``, which ``extra`` brings, cannot be imported here; else None."""
    import importlib.util

    return install(extra) if importlib.util.find_spec(module) is None else None
