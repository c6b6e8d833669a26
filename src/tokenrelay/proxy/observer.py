"""The proxy's counters hook: what the metrics side connects to.

The proxy calls an observer from its hot path, so implementations must be cheap and never raise:
``request`` once per answered request (the status the client got, and seconds from the request's
first byte, when parsing begins, to the end of the answer), ``retry`` once per request sent upstream
a second time (a 401 healed with a refreshed token, or a pooled connection that had gone stale).
A request whose client went away before any answer is counted with status 499. An HTTP/2 stream
is counted by ``stream`` instead of ``request``, with the ``grpc-status`` the client got (None when
the call is not gRPC or ended without one).
"""

from __future__ import annotations

from typing import Protocol


class ProxyObserver(Protocol):
    """Hears about every proxied request."""

    def request(self, code: int, duration: float) -> None: ...

    def retry(self) -> None: ...

    def stream(self, code: int, grpc_status: int | None, duration: float) -> None: ...


class NullObserver:
    """The default observer: counts nothing."""

    def request(self, code: int, duration: float) -> None:
        pass

    def retry(self) -> None:
        pass

    def stream(self, code: int, grpc_status: int | None, duration: float) -> None:
        pass
