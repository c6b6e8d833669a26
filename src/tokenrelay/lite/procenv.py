"""The process environment without importing ``os``.

A credential helper run needs nothing else of ``os``, whose import (with ``_collections_abc``,
``posixpath`` and ``stat``) is a tenth of a bare interpreter's start-up once ``site`` is skipped.
Standard library only, and no ``typing``.
"""

import sys


def environ() -> dict[str, str]:
    """The environment as ``os.environ`` reads it (``os.environ`` itself once ``os`` is loaded)."""
    loaded = sys.modules.get("os")
    if loaded is not None:
        return loaded.environ  # type: ignore[no-any-return]
    import posix

    encoding = sys.getfilesystemencoding()
    return {
        key.decode(encoding, "surrogateescape"): value.decode(encoding, "surrogateescape")
        for key, value in posix.environ.items()
    }
