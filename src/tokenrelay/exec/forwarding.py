"""The signals exec forwards to its command once it runs (``session``); before, each ends exec with
128+N (``cli``). Its own module: ``cli`` starts before aiohttp loads, ``session`` after."""

from __future__ import annotations

import signal

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
