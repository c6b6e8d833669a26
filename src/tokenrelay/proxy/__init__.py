"""The token-injecting reverse proxy: ``tokenrelay run --proxy-listen 127.0.0.1:8080``.

Its parts, one job each: ``upstream`` (the one place requests may go, and how a client's target maps
to it), ``headers`` (which header lines cross, RFC 9110 §7.6.1), ``bearer`` (the Authorization line,
from the TokenSource), ``client`` (a client connection: parse, forward, limits), ``connection`` (an
upstream connection: relay the answer), ``pool`` (keep-alive upstream connections), ``answers`` (the
proxy's own AIP-193 errors), ``observer`` (counters for metrics), ``context`` (the limits and the
narrow view of the proxy each client connection gets), ``limits`` (the bounds), ``server`` (the
daemon component). Dependencies run one way: ``server`` -> ``client`` -> ``context`` -> ``pool`` ->
``connection``; an upstream connection reports to the client side through ``AnswerEvents``.
"""

from .limits import Limits
from .observer import NullObserver, ProxyObserver
from .server import ProxyServer

__all__ = ["Limits", "NullObserver", "ProxyObserver", "ProxyServer"]
