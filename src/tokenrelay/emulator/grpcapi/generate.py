"""Regenerate the committed protobuf modules: ``python -m tokenrelay.emulator.grpcapi.generate``.

Needs grpcio-tools (in the ``test`` extra). The output is deterministic for one grpcio-tools
version, and a test regenerates into a temporary directory and compares, so the committed code
cannot drift from the ``.proto`` files.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE_ROOT = HERE.parents[2]  # the directory holding the tokenrelay package
PROTOS = (
    HERE / "iam.proto",
    HERE / "registry.proto",
    HERE / "vulnerabilities.proto",
    SOURCE_ROOT / "tokenrelay" / "tokens" / "idsources" / "workload.proto",  # the SPIFFE Workload API
)


def generate(out: Path = SOURCE_ROOT) -> None:
    from grpc_tools import protoc

    well_known = resources.files("grpc_tools") / "_proto"
    relative = [str(path.relative_to(SOURCE_ROOT)) for path in PROTOS]
    args = [
        "protoc",
        f"-I{SOURCE_ROOT}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        *relative,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed: see its message above")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE_ROOT)
