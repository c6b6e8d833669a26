"""aiohttp's table of file types, built without reading the system's mime.types files.

Importing aiohttp.web builds the table its ``FileResponse`` guesses a Content-Type from
(``mimetypes.MimeTypes()``), and that first reads /etc/mime.types and the like into the standard
library's global table: 0.4 MiB of an idle sidecar's RSS (bench/idle_rss.py), for a sidecar that
serves no file. ``load_aiohttp_web`` imports aiohttp.web with the global table marked as loaded, so
aiohttp's table holds Python's built-in types (and aiohttp's additions) only; the standard library's
own functions (``mimetypes.guess_type``) still read the system files on their first use.
``tokenrelay run`` calls it before anything imports aiohttp.web; anywhere else it is a no-op.
"""

from __future__ import annotations

import mimetypes
import sys


def load_aiohttp_web() -> None:
    """Import aiohttp.web, its file-type table without the system's files (unless already imported)."""
    if "aiohttp.web_fileresponse" in sys.modules or mimetypes.inited:
        return
    mimetypes.inited = True  # MimeTypes() then starts from the built-in table and reads no file
    try:
        import aiohttp.web  # noqa: F401
    finally:
        mimetypes.inited = False
