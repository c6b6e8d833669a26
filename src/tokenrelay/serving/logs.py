"""Log lines: one JSON object per line (or plain text), and never a secret in either.

Fields passed with ``extra=`` become keys of the JSON object. Every rendered line goes through
``redact.scrub`` as a last line of defence; tokenrelay's own messages carry fingerprints, not tokens.
Tracebacks are printed at debug level only: an operator at info level reads one line per event.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import IO, Any

from ..lite.redact import scrub
from ..lite.timestamps import format_timestamp

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def __init__(self, tracebacks: bool) -> None:
        super().__init__()
        self._tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": format_timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_fields(record))
        if record.exc_info and self._tracebacks:
            line["traceback"] = self.formatException(record.exc_info)
        return scrub(json.dumps(line, default=str))


class TextFormatter(logging.Formatter):
    def __init__(self, tracebacks: bool) -> None:
        super().__init__()
        self._tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        text = (
            f"{format_timestamp(record.created)} {record.levelname.lower():7} "
            f"{record.getMessage()}{' ' + extras if extras else ''}"
        )
        if record.exc_info and self._tracebacks:
            text += "\n" + self.formatException(record.exc_info)
        return scrub(text)


def setup(level: str = "info", fmt: str = "json", stream: IO[str] | None = None) -> None:
    """Configure the root logger for tokenrelay's commands."""
    numeric = getattr(logging, level.upper())
    tracebacks = numeric <= logging.DEBUG
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(tracebacks) if fmt == "json" else TextFormatter(tracebacks))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # aiohttp's access log would add a line per token request; keep it at debug.
    logging.getLogger("aiohttp.access").setLevel(logging.DEBUG if tracebacks else logging.WARNING)
    # hpack logs every header and encoded header block at debug: the token, Huffman-coded, where the
    # scrubber cannot see it. Never below WARNING, for the proxy's HTTP/2 and the emulator's alike.
    logging.getLogger("hpack").setLevel(logging.WARNING)
