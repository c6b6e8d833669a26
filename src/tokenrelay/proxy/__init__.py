"""The token-injecting reverse proxy: ``tokenrelay run --proxy-listen 127.0.0.1:8080``.

Two front ends, HTTP/1.1 and HTTP/2, each translating its framing, on one request policy: ``methods``
(which methods are refused, which are sent again), ``headers`` (which header fields cross, RFC 9110
§7.6.1 and RFC 9113 §8.2.2), ``refusals`` (the proxy's own answers, one catalogue), ``policy`` (the
slow path: a token, or a healed one after a 401, and an upstream connection; the replay of a body),
``bearer`` (the Authorization field, from the TokenSource), ``limits`` (every bound of both), ``target``
(the one place requests may go, with the verifying TLS context of an https upstream), ``observer``
(counters for metrics), ``context`` (the narrow view of the proxy each client connection gets) and
``server`` (the daemon component).
HTTP/1.1: ``downstream`` (a client connection: parse, forward, the limits), ``upstream`` (a connection
to the upstream: relay the answer), ``pool`` (keep-alive upstream connections), ``flow`` (why reading
from a client is paused), ``answers`` (refusals as HTTP/1.1 responses).
Dependencies run one way: ``server`` -> ``downstream`` -> ``context`` -> ``pool`` -> ``upstream``;
an upstream connection reports to the downstream side through its ``AnswerEvents`` Protocol.
HTTP/2 (h2c prior knowledge, gRPC), loaded with the first HTTP/2 client: ``h2_downstream`` (a client
connection), ``h2_stream`` (one relayed stream), ``h2_upstream`` (the shared upstream connections),
``h2_answers`` (refusals as trailers-only gRPC statuses or AIP-193 bodies), ``h2_connection`` (h2
without its repeated costs), ``h2_relay`` and ``h2_flush`` (what the HTTP/2 connections share).
"""

from .limits import Limits
from .observer import NullObserver, ProxyObserver
from .server import ProxyServer

__all__ = ["Limits", "NullObserver", "ProxyObserver", "ProxyServer"]
