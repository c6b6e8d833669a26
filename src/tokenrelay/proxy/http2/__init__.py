"""The HTTP/2 front end (h2c prior knowledge, gRPC), loaded with the first HTTP/2 client:
``downstream`` (a client connection), ``stream`` (one relayed stream), ``upstream`` (the shared
upstream connections), ``answers`` (refusals as trailers-only gRPC statuses or AIP-193 bodies),
``session`` (one end of an HTTP/2 connection, either role) with ``frames`` (the wire format),
``headercoding`` (hpack without the costs a relay pays again and again), ``relay`` and ``flush``
(what the HTTP/2 connections of one proxy share). The request policy is the package's (methods,
headers, refusals, policy, bearer, limits).
"""
