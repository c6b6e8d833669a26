"""Standard library only, cheap to import: what the credential helpers load.

The rule: a module here imports only the standard library, ``tokenrelay.errors`` and its siblings,
never ``typing`` (``TYPE_CHECKING = False`` instead of ``typing.TYPE_CHECKING``), ``dataclasses``,
``asyncio``, aiohttp or any third-party package; the modules on a helper's ``get`` path avoid
``json``, ``re``, ``enum``, ``socket`` and ``urllib`` too, since every docker pull and git fetch
pays for each import in start-up time (``tokenrelay.errors`` as well: they import it only to raise).
``tests/core/test_import_budget.py`` holds the package to it by running
``python -S -X importtime -c "import tokenrelay.lite.<module>"`` for every module. This package
imports none of its modules itself.

It holds one function of its own, ``environ()``: every helper run reads the environment and loads
this package anyway, and a module of its own for these few lines cost each run about 0.1 ms.
"""

import sys


def environ() -> dict[str, str]:
    """The process environment as ``os.environ`` reads it (``os.environ`` itself once ``os`` is
    loaded), without importing ``os``: with ``_collections_abc``, ``posixpath`` and ``stat`` it is a
    tenth of a bare interpreter's start-up once ``site`` is skipped."""
    loaded = sys.modules.get("os")
    if loaded is not None:
        return loaded.environ  # type: ignore[no-any-return]
    import posix

    encoding = sys.getfilesystemencoding()
    return {
        key.decode(encoding, "surrogateescape"): value.decode(encoding, "surrogateescape")
        for key, value in posix.environ.items()
    }
