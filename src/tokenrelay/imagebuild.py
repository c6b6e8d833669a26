"""What the Dockerfile's builder stage asks of the package once it is installed, with its extras.

``python -m tokenrelay.imagebuild "$EXTRAS"`` checks the ``EXTRAS`` build argument against the extras
the package declares (a misspelt one would otherwise be a pip warning and an image without it),
records them at the virtualenv's root (so that a missing extra is named as a build argument there,
``lite.extras``), and prints the distributions the image leaves out, one a line (a requirements
file for ``pip uninstall``): the installers, and the emulator's gRPC stack but for what the extras
asked for require (``spiffe``: grpcio and protobuf).
Exit 2 and one line naming the build argument when ``EXTRAS`` is wrong. ``--imports``, run on the
runtime stage, imports what the recorded extras brought: a base that lacks a library they link is a
build error, not a source that fails at its first read.

Standard library only: the builder has the package and its dependencies, nothing else.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from importlib import import_module, metadata
from pathlib import Path

from .lite.extras import BUILD_ARG, IMAGE_EXTRAS_FILE, image_extras

DISTRIBUTION = "tokenrelay"
# Installed as dependencies so that `pip install .` gives a working `tokenrelay dev`; the image runs
# the sidecar, the agent and the webhook, never the emulator, and nothing runs pip there.
EMULATOR_ONLY = ("grpcio", "grpcio-reflection", "protobuf", "googleapis-common-protos")
INSTALLERS = ("pip", "setuptools")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


class BuildArgError(ValueError):
    """The EXTRAS build argument names something the package does not offer."""


def normalized(name: str) -> str:
    """A distribution or extra name as PEP 503 and PEP 685 compare them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> list[str]:
    """The extras the installed package declares."""
    return sorted(normalized(e) for e in metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or [])


def requested(value: str) -> list[str]:
    """The extras of an ``EXTRAS`` value (comma- or space-separated), each one the package declares."""
    names = [normalized(n) for n in re.split(r"[,\s]+", value) if n]
    known = declared()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BuildArgError(
            f"--build-arg {BUILD_ARG}={value}: tokenrelay has no extra {', '.join(unknown)}; "
            f"its extras are {', '.join(known)} (comma-separated, e.g. {BUILD_ARG}=aws,spiffe)"
        )
    return list(dict.fromkeys(names))


def _requirements(distribution: str, extra: str | None = None) -> set[str]:
    """The names ``distribution`` requires: with ``extra``, those of that extra only; else those of
    no extra."""
    names = set()
    for line in metadata.requires(distribution) or []:
        found = _NAME.match(line)
        marker = _EXTRA_MARKER.search(line)
        of = None if marker is None else normalized(marker.group(1))
        if found and of == extra:
            names.add(normalized(found.group()))
    return names


def needed(extras: list[str]) -> set[str]:
    """Every distribution the ``extras`` bring, with their own requirements (conservatively: markers
    other than ``extra`` are taken as true, so that nothing needed is left out)."""
    todo = set().union(*(_requirements(DISTRIBUTION, extra) for extra in extras))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        seen.add(name)
        try:
            todo |= _requirements(name) - seen
        except metadata.PackageNotFoundError:
            continue
    return seen


def left_out(extras: list[str]) -> list[str]:
    """The distributions the image uninstalls once the package and ``extras`` are in."""
    keep = needed(extras)
    return [name for name in (*EMULATOR_ONLY, *INSTALLERS) if name not in keep]


def broken_imports(extras: list[str], importer: Callable[[str], object] = import_module) -> list[str]:
    """``MODULE (why)`` for each top-level module of the distributions ``extras`` require that does
    not import here: a runtime base without a shared library one of them links (grpcio:
    libstdc++)."""
    wanted = set().union(*(_requirements(DISTRIBUTION, extra) for extra in extras))
    modules = sorted(
        module
        for module, distributions in metadata.packages_distributions().items()
        if wanted & {normalized(d) for d in distributions}
    )
    broken = []
    for module in modules:
        try:
            importer(module)
        except ImportError as exc:
            broken.append(f"{module} ({exc})")
    return broken


def main(argv: list[str], prefix: str = sys.prefix) -> int:
    """Check ``argv[0]`` (the EXTRAS value), record it in the virtualenv at ``prefix``, print what to
    uninstall; 2 and one line on stderr when it names an extra the package lacks.

    ``--imports``, on the runtime stage: 1 and one line when a recorded extra does not import there."""
    if argv[:1] == ["--imports"]:
        broken = broken_imports(image_extras(prefix) or [])
        if broken:
            print(
                f"error: the {BUILD_ARG} build argument's packages do not import on PYTHON_IMAGE: "
                f"{'; '.join(broken)}: use a PYTHON_IMAGE with the shared libraries they need "
                "(python:3.12-slim-bookworm has them)",
                file=sys.stderr,
            )
            return 1
        return 0
    value = argv[0] if argv else ""
    try:
        extras = requested(value)
    except BuildArgError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    (Path(prefix) / IMAGE_EXTRAS_FILE).write_text("".join(f"{name}\n" for name in extras))
    print("\n".join(left_out(extras)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
