"""The HTTP/1.1 front end: ``downstream`` (a client connection: parse with httptools, forward, the
limits), ``upstream`` (a connection to the upstream: relay the answer), ``pool`` (keep-alive upstream
connections), ``flow`` (why reading from a client is paused), ``answers`` (refusals as HTTP/1.1
responses). The request policy is the package's (methods, headers, refusals, policy, bearer, limits).
"""
