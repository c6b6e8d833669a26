"""SIGHUP: re-read the configuration, apply what can change live, and refresh every token now.

Only a few settings change in a running process (``LIVE``); the others are wired into servers,
sessions and sockets at start, so a change to them is logged as needing a restart and otherwise
ignored. A configuration that no longer loads is logged and the running one kept.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..serving import logs
from ..serving.sinks import FileSink
from ..tokens.provider import TokenProviders
from .settings import Settings

if TYPE_CHECKING:
    from ..render import RenderSink

log = logging.getLogger("tokenrelay")

LIVE = ("log_level", "log_format", "token_file_mode", "render_mode")


def changed(old: Settings, new: Settings) -> list[str]:
    """Names of the settings that differ (``config``, the file's path, is not a setting)."""
    return [
        f.name
        for f in dataclasses.fields(Settings)
        if f.compare and getattr(old, f.name) != getattr(new, f.name)
    ]


class Reloader:
    """The SIGHUP handler."""

    def __init__(
        self,
        settings: Settings,
        reload: Callable[[], Settings] | None,
        providers: TokenProviders,
        sinks: Sequence[FileSink] = (),
        renders: Sequence[RenderSink] = (),
    ) -> None:
        self.settings = settings
        self._reload = reload
        self._providers = providers
        self._sinks = tuple(sinks)
        self._renders = tuple(renders)

    def __call__(self) -> None:
        if self._reload is not None:
            self._apply(self._reload)
        log.info("SIGHUP: refreshing every token now")
        self._providers.refresh_all()

    def _apply(self, reload: Callable[[], Settings]) -> None:
        try:
            new = reload()
        except ConfigError as exc:
            log.error("SIGHUP: configuration not reloaded, keeping it", extra={"error": exc.message})
            return
        differ = changed(self.settings, new)
        live = [name for name in differ if name in LIVE]
        if "log_level" in live or "log_format" in live:
            logs.setup(new.log_level, new.log_format)
        if "token_file_mode" in live:
            for sink in self._sinks:
                sink.mode = new.token_file_mode
        if "render_mode" in live:
            for render in self._renders:
                render.mode = new.render_mode  # the refresh SIGHUP starts writes it with the new mode
        self.settings = dataclasses.replace(self.settings, **{name: getattr(new, name) for name in live})
        log.info(
            "SIGHUP: configuration reloaded",
            extra={"applied": live, "needRestart": [name for name in differ if name not in LIVE]},
        )
