"""The token-injecting reverse proxy: ``tokenrelay run --proxy-listen 127.0.0.1:8080``.

Its parts, one job each, named by direction: ``downstream`` (a client connection: parse, forward,
limits, the retry policy), ``upstream`` (a connection to the upstream: relay the answer), ``target``
(the one place requests may go, and how a client's target maps to it, with the verifying TLS
context of an https upstream from ``tokenrelay.systemroots``), ``pool`` (keep-alive upstream
connections), ``headers`` (which header lines cross, RFC 9110 §7.6.1), ``bearer`` (the Authorization
line, from the TokenSource), ``flow`` (why reading from a client is paused), ``limits`` (the bounds),
``context`` (the narrow view of the proxy each client connection gets), ``answers`` (the proxy's own
AIP-193 errors), ``observer`` (counters for metrics), ``server`` (the daemon component).
Dependencies run one way: ``server`` -> ``downstream`` -> ``context`` -> ``pool`` -> ``upstream``;
an upstream connection reports to the downstream side through its ``AnswerEvents`` Protocol.
HTTP/2 (h2c prior knowledge, gRPC), loaded with the first HTTP/2 client: ``h2_downstream`` (a client
connection), ``h2_stream`` (one relayed stream), ``h2_upstream`` (the shared upstream connections),
``h2_answers`` (trailers-only gRPC statuses and AIP-193 bodies), ``h2_relay`` (what they share).
"""

from .limits import Limits
from .observer import NullObserver, ProxyObserver
from .server import ProxyServer

__all__ = ["Limits", "NullObserver", "ProxyObserver", "ProxyServer"]
