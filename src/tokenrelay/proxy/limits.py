"""The proxy's bounds against abusive or broken clients and upstreams, in one place."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds against abusive or broken clients (and a slow upstream)."""

    header_bytes: int = 32 * 1024  # request line and headers together (431 beyond); the answer's too
    header_count: int = 100  # (431 beyond); the answer's too (502 beyond)
    header_timeout: float = 10.0  # from a request's first byte to the end of its head (408 after)
    idle_timeout: float = 75.0  # a keep-alive connection with no request is closed after this
    max_connections: int = 1024  # client connections held at once (503 beyond)
    upstream_timeout: float = 60.0  # from a request sent in full to the answer's head (504 after),
    # and the longest an upstream may go silent mid-answer, or leave the request unread (a cut after)
    body_timeout: float = 20.0  # a request body's allowance before body_min_rate applies (408 after)
    body_min_rate: int = 500  # bytes/s a request body must average beyond body_timeout
    # answer bytes an HTTP/2 client connection leaves unread in the proxy (its streams' windows closed,
    # or its socket full); the stream whose bytes go beyond is reset (ENHANCE_YOUR_CALM). A stream
    # whose queued bytes make no progress for upstream_timeout is reset too (CANCEL).
    h2_buffer_bytes: int = 4 * 1024 * 1024
