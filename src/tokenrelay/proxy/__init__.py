"""The token-injecting reverse proxy: ``tokenrelay run --proxy-listen 127.0.0.1:8080``.

Two front ends, HTTP/1.1 and HTTP/2, each translating its framing, on one request policy: ``methods``
(which methods are refused, which are sent again), ``headers`` (which header fields cross, RFC 9110
§7.6.1 and RFC 9113 §8.2.2), ``refusals`` (the proxy's own answers, one catalogue), ``policy`` (the
slow path: a token, or a healed one after a 401, and an upstream connection; the replay of a body),
``bearer`` (the Authorization field, from the TokenSource), ``deadline`` (the upstream's deadline for
a request, as the sweep judges it), ``limits`` (every bound of both), ``target``
(the one place requests may go, with the verifying TLS context of an https upstream), ``observer``
(counters for metrics), ``upstreams`` (the connections to the upstream: each front end's pool, made
on first use, and the connect code they share), ``context`` (the narrow view of the proxy each client
connection gets) and ``server`` (the daemon component, which owns the upstreams).
The front ends only translate their framing (http1/ and http2/ say how); they import the shared
modules, never each other, except that the HTTP/1.1 side hands a connection that opens with the
HTTP/2 preface to ``http2.downstream`` (imported then: h2 loads with the first HTTP/2 client).
Dependencies run one way: ``server`` -> ``http1.downstream`` -> ``http1.request`` -> ``http1.pool`` ->
``http1.upstream``, and every front-end module -> ``context`` -> ``upstreams``; an upstream connection
reports to its request through its ``AnswerEvents`` Protocol, and a request to its client connection
through ``request.Client``. tests/proxy/test_layering.py holds the package to these rules.
"""

from typing import TYPE_CHECKING, Any

from .limits import Limits
from .observer import NullObserver, ProxyObserver

if TYPE_CHECKING:
    from .server import ProxyServer


def __getattr__(name: str) -> Any:
    # The server (and the event loop's world with it) loads when first named: run's settings read
    # the limits' option rows, and every command's parser reads those.
    if name == "ProxyServer":
        from .server import ProxyServer

        return ProxyServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Limits", "NullObserver", "ProxyObserver", "ProxyServer"]
