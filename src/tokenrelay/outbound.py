"""The one maker of the relay's own HTTP client sessions (the exchange, a platform's token endpoint,
the doctor's checks): proxies from the proxy variables, and nothing else from the environment.

aiohttp's ``trust_env=True`` also reads ``~/.netrc`` (or ``$NETRC``) and puts its Basic credentials on
every request to a host it names: beside the exchange's bearer that is a ValueError on every
exchange, and a ``--render netrc`` into that file fed the relay's own API token back to it. So
``trust_env`` stays off, and each request's proxy is chosen here as aiohttp's ``trust_env`` chooses it
(urllib's ``getproxies`` and ``proxy_bypass``: HTTP_PROXY, HTTPS_PROXY and NO_PROXY, either case), with
a proxy's credentials taken from its URL only, never from a file. ``curl``'s and ``pip``'s reading of
``.netrc`` is untouched: this is about the relay's own requests.
"""

from __future__ import annotations

import logging
import urllib.request
from typing import Any

import aiohttp
from yarl import URL

log = logging.getLogger(__name__)


def session(connector: aiohttp.BaseConnector | None = None) -> aiohttp.ClientSession:
    """A client session whose requests go through the proxy the proxy variables name, if any."""
    return aiohttp.ClientSession(connector=connector, trust_env=False, request_class=_ProxiedRequest)


def proxy_for(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy for ``url`` and its credentials (from its URL's user part), or ``(None, None)``."""
    if url.host is None or urllib.request.proxy_bypass(url.host):
        return None, None
    raw = urllib.request.getproxies().get(url.scheme)
    if not raw:
        return None, None
    # host:port alone is an http:// proxy to curl, pip and urllib: to yarl, a relative URL
    proxy = URL(raw if "://" in raw else f"http://{raw}")
    if proxy.scheme == "https":  # aiohttp speaks plain HTTP to a proxy only, and ignores these too
        log.warning("an https:// proxy is not supported: ignored", extra={"proxy": str(proxy.origin())})
        return None, None
    return proxy.with_user(None), aiohttp.BasicAuth.from_url(proxy)


class _ProxiedRequest(aiohttp.ClientRequest):
    """A request given the proxy variables' proxy when its caller named none; made anew per redirect."""

    def __init__(self, method: str, url: URL, **kwargs: Any) -> None:
        if kwargs.get("proxy") is None:
            kwargs["proxy"], kwargs["proxy_auth"] = proxy_for(url)
        super().__init__(method, url, **kwargs)
