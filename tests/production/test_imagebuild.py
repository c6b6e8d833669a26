"""The Dockerfile's EXTRAS build argument as the package reads it (``python -m tokenrelay.imagebuild``),
and what a missing extra's message says inside the image and outside it. The image tests build and
run it (tests/image/test_extras.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenrelay import imagebuild
from tokenrelay.lite import extras


def test_outside_the_image_a_missing_extra_is_a_pip_install(tmp_path: Path) -> None:
    """A virtualenv the image's build did not make: the extra's pip command."""
    assert extras.install("aws", str(tmp_path)) == "pip install 'tokenrelay[aws]'"


def test_in_the_image_a_missing_extra_is_the_build_argument_with_it(tmp_path: Path) -> None:
    """In the image (its build recorded the extras it installed), the message names
    ``--build-arg EXTRAS`` with the extras it had and the one missing, and no pip, which it lacks."""
    assert imagebuild.main(["spiffe"], prefix=str(tmp_path)) == 0
    said = extras.install("aws", str(tmp_path))
    assert "--build-arg EXTRAS=spiffe,aws " in said and "pip" not in said
    assert imagebuild.main([""], prefix=str(tmp_path)) == 0
    assert "--build-arg EXTRAS=aws " in extras.install("aws", str(tmp_path))


def test_a_misspelt_extra_is_one_line_naming_the_build_argument_and_the_extras(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``EXTRAS=aws,spifee`` stops the build (exit 2) with one line naming the build argument, the
    unknown extra and the real ones, and records nothing."""
    assert imagebuild.main(["aws,spifee"], prefix=str(tmp_path)) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err.count("\n") == 1
    assert "--build-arg EXTRAS=aws,spifee: tokenrelay has no extra spifee" in said.err
    assert "aws, keyring, spiffe" in said.err
    assert extras.install("aws", str(tmp_path)).startswith("pip install")


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("", set()),
        ("aws", set()),
        ("aws,spiffe", {"grpcio", "protobuf"}),
        (" Spiffe ", {"grpcio", "protobuf"}),
    ],
)
def test_the_image_leaves_out_the_emulators_stack_but_what_the_extras_need(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, kept: set[str]
) -> None:
    """pip, setuptools and the emulator's gRPC stack are uninstalled, but for grpcio and protobuf when
    the spiffe source, which runs on them, is asked for."""
    assert imagebuild.main([value], prefix=str(tmp_path)) == 0
    left_out = set(capsys.readouterr().out.split())
    everything = {*imagebuild.EMULATOR_ONLY, *imagebuild.INSTALLERS}
    assert left_out == everything - kept


def test_a_runtime_base_where_an_extras_package_does_not_import_is_named(tmp_path: Path) -> None:
    """The runtime stage's check: a package of a recorded extra that does not import (grpcio on a base
    without libstdc++) is named with the loader's words; with the libraries there, nothing is."""

    def without_libstdcxx(module: str) -> object:
        raise ImportError("libstdc++.so.6: cannot open shared object file: No such file or directory")

    assert imagebuild.broken_imports(["spiffe"], without_libstdcxx) == [
        "google (libstdc++.so.6: cannot open shared object file: No such file or directory)",
        "grpc (libstdc++.so.6: cannot open shared object file: No such file or directory)",
    ]
    assert imagebuild.broken_imports(["aws", "spiffe"]) == []
    assert imagebuild.main(["aws,spiffe"], prefix=str(tmp_path)) == 0
    assert imagebuild.main(["--imports"], prefix=str(tmp_path)) == 0
