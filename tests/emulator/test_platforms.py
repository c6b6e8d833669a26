"""The platforms the emulator plays are one table, each row declared by a module of its own."""

from __future__ import annotations

import importlib
import pkgutil

import tokenrelay.emulator.platforms
from tokenrelay.emulator.platforms.base import Platform
from tokenrelay.emulator.platforms.registry import PLATFORMS
from tokenrelay.tokens.idsources.registry import SOURCES


def test_every_platform_module_is_a_row_of_the_table_for_a_source() -> None:
    """Each module of platforms/ declaring a PLATFORM is its row of PLATFORMS, every row comes from
    such a module, and each is named as the --id-token-source it serves."""
    package = tokenrelay.emulator.platforms
    declared: dict[str, Platform] = {}
    for found in pkgutil.iter_modules(package.__path__):
        platform = getattr(importlib.import_module(f"{package.__name__}.{found.name}"), "PLATFORM", None)
        if isinstance(platform, Platform):
            declared[platform.name] = platform
    assert declared == PLATFORMS
    assert sorted(set(PLATFORMS) - set(SOURCES)) == []
