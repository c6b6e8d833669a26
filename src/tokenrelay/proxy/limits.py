"""The proxy's bounds against abusive or broken clients and upstreams, for both protocols, in one place.

Like hypercorn's ``Config``: one object that the HTTP/1.1 and the HTTP/2 front ends both read. Each
field's comment says which protocol honours it (both, unless it says so); ``h2_*`` fields are HTTP/2's
alone. A user-facing one declares its option row in its field's metadata (``OPTION``): ``options()``
hands those rows to ``tokenrelay run``'s table, so each is a flag, a variable, a TOML key and a docs
row, and ``from_settings`` builds the limits from their values, in this one place. Their defaults
come from ``lite.names``; docs/proxy.md's limits tables are checked against these defaults
(tests/proxy/test_docs.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Self

from ..lite.names import DEFAULT_PROXY_MAX_CONNECTIONS, DEFAULT_PROXY_TIMEOUT
from ..options import Option

OPTION = "option"  # the metadata key of a field's option row


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds against abusive or broken clients (and a slow upstream)."""

    # request line and headers together (431 beyond); the answer's too (502 beyond). HTTP/2: the
    # header list size, decoded, and the header block still arriving, coded (GOAWAY beyond)
    header_bytes: int = 32 * 1024
    header_count: int = 100  # request header fields (431 beyond); the answer's too (502 beyond)
    # HTTP/1.1: from a request's first byte to the end of its head (408 after); HTTP/2: from a HEADERS
    # without END_HEADERS to the end of its block (GOAWAY ENHANCE_YOUR_CALM after)
    header_timeout: float = 10.0
    idle_timeout: float = 75.0  # a client connection with no request (no stream) is closed after this
    # from a request sent in full to the answer's head (504 after), and the longest an upstream may go
    # silent mid-answer, or leave the request unread (a cut after); HTTP/2: also the longest a stream's
    # answer bytes may wait for a client that reads none of them (RST_STREAM CANCEL after)
    upstream_timeout: float = field(
        default=DEFAULT_PROXY_TIMEOUT,
        metadata={
            OPTION: Option(
                "proxy_timeout",
                "How long the proxy waits for the upstream's answer, in seconds (then 504).",
                kind="seconds",
                default=DEFAULT_PROXY_TIMEOUT,
                metavar="SECONDS",
            )
        },
    )
    max_connections: int = field(  # client connections held at once (503 beyond)
        default=DEFAULT_PROXY_MAX_CONNECTIONS,
        metadata={
            OPTION: Option(
                "proxy_max_connections",
                "Most client connections the proxy holds open at once.",
                kind="int",
                default=DEFAULT_PROXY_MAX_CONNECTIONS,
                metavar="N",
            )
        },
    )
    # a request body's allowance before body_min_rate applies (408 after; HTTP/2: then RST_STREAM, and
    # only until the answer's head: past it, a slow request is a bidirectional call's own pace)
    body_timeout: float = 20.0
    body_min_rate: int = 500  # bytes/s a request body must average beyond body_timeout
    pending_bytes: int = (
        256 * 1024
    )  # HTTP/1.1: body held while no upstream connection is bound (reading stops)
    replay_bytes: int = 64 * 1024  # a request body kept to send it again (a 401 heal, a lost connection)
    upstream_idle_timeout: float = 30.0  # an idle upstream connection is closed after this (nginx's is 75 s)
    linger_timeout: float = 2.0  # HTTP/1.1: unread bytes dropped after a refusal, before the close
    # HTTP/2, towards a client: SETTINGS_MAX_CONCURRENT_STREAMS and the windows it may send ahead
    h2_max_streams: int = 100
    h2_stream_window: int = 256 * 1024
    h2_connection_window: int = 1024 * 1024
    # per second: control frames (SETTINGS by entry, PING, their ACKs, PRIORITY, GOAWAY, empty DATA,
    # unknown types, frames dropped unread on streams reset or closed, and WINDOW_UPDATEs beyond two
    # for each DATA frame sent), and streams reset by the client (rapid reset, CVE-2023-44487); beyond
    # either, GOAWAY ENHANCE_YOUR_CALM
    h2_control_frames: int = 1000
    h2_resets: int = 200  # per client address (or uid), across its connections: resets.py
    # a DATA frame this large (or the last one queued) may earn two WINDOW_UPDATEs from the client;
    # window granted a byte at a time, again and again, earns none
    h2_update_worthy_bytes: int = 1024
    # answer bytes an HTTP/2 client connection leaves unread in the proxy (its streams' windows closed,
    # or its socket full); the stream whose bytes go beyond is reset (ENHANCE_YOUR_CALM)
    h2_buffer_bytes: int = 4 * 1024 * 1024
    # HTTP/2, towards the upstream: streams per connection (fewer if the upstream says so; another
    # connection beyond) and the window it may send ahead on a stream (the connection's: all of them)
    h2_upstream_streams: int = 100
    h2_upstream_stream_window: int = 256 * 1024

    @classmethod
    def from_settings(cls, settings: object) -> Self:
        """The limits whose fields declare an option, from those options' values in ``settings``
        (by option name); the others at their defaults."""
        values: dict[str, Any] = {
            item.name: getattr(settings, item.metadata[OPTION].name)
            for item in dataclasses.fields(cls)
            if OPTION in item.metadata
        }
        return cls(**values)


def options(limits: type[Limits] | None = None) -> tuple[Option, ...]:
    """The option rows the fields of ``limits`` (this module's ``Limits``) declare, in their order."""
    fields = dataclasses.fields(limits or Limits)
    return tuple(item.metadata[OPTION] for item in fields if OPTION in item.metadata)
