"""The token-injecting reverse proxy: ``tokenrelay run --proxy-listen 127.0.0.1:8080``.

Its parts, one job each: ``upstream`` (the one place requests may go, and how a client's target maps
to it), ``headers`` (which header lines cross, RFC 9110 §7.6.1), ``bearer`` (the Authorization line,
from the TokenSource), ``client`` (a client connection: parse, forward, limits), ``connection`` (an
upstream connection: relay the answer), ``pool`` (keep-alive upstream connections), ``answers`` (the
proxy's own AIP-193 errors), ``observer`` (counters for metrics), ``server`` (the daemon component).
HTTP/2 (h2c prior knowledge, gRPC), loaded with the first HTTP/2 client: ``h2_downstream`` (a client
connection), ``h2_stream`` (one relayed stream), ``h2_upstream`` (the shared upstream connections),
``h2_answers`` (trailers-only gRPC statuses and AIP-193 bodies), ``h2_relay`` (what they share).
"""

from .client import Limits
from .observer import NullObserver, ProxyObserver
from .server import ProxyServer

__all__ = ["Limits", "NullObserver", "ProxyObserver", "ProxyServer"]
