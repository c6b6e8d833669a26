"""The HTTP/1.1 front end: ``downstream`` (a client connection, the wire: parse with httptools, queue
pipelined requests, the client's limits), ``request`` (one request's lifecycle: policy, upstream,
body, answer, as HTTP/2's ``Stream``), ``upstream`` (a connection to the upstream: relay the answer),
``pool`` (keep-alive upstream connections), ``flow`` (why reading from a client is paused),
``answers`` (refusals as HTTP/1.1 responses). The request policy is the package's (methods, headers,
refusals, policy, bearer, deadline, limits).
"""
